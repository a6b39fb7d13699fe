-- unique_push: take a unique job's lock and push the job, in one step (docs/unique.md).
-- A check from the client followed by a push let two callers both see the lock
-- free and both push: here the SET NX decides, and only its winner pushes.
-- A duplicate gets the holder's jid back and writes nothing. A push that
-- fails (a queue key of the wrong type) gives the lock back before the error
-- returns: a script stopped by an error keeps the writes made before it, and a
-- lock with no job behind it would refuse every copy of this job until its TTL.
-- The queue's name goes into `queues` by a plain SADD sent with this call, as
-- for any push: a listing, harmless for a duplicate, and cheaper outside a script.
-- KEYS[1] = unique:<digest>, KEYS[2] = queue:<name> (now) or the schedule ZSET (later)
-- ARGV[1] = jid, ARGV[2] = lock TTL (ms), ARGV[3] = payload,
-- ARGV[4] = '' = scheduled: ZADD at score ARGV[5] instead of LPUSH, ARGV[5] = score
-- Returns 1 when pushed, the holder's jid (a string) for a duplicate.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- GET, not pcall: a lock key of the wrong type must be named to the caller, not taken for a holder.
  return redis.call('GET', KEYS[1])
end
local pushed
if ARGV[4] == '' then
  pushed = redis.pcall('ZADD', KEYS[2], ARGV[5], ARGV[3])
else
  pushed = redis.pcall('LPUSH', KEYS[2], ARGV[3])
end
if type(pushed) == 'table' and pushed['err'] then
  redis.call('DEL', KEYS[1])
  return pushed
end
return 1
