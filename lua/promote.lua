-- promote: move one due job from `schedule` or `retry` (or `dead`, from the API) onto its queue, atomically.
-- The caller read the entry and built the payload to push (enqueued_at
-- restamped, "at" removed) in Python, so large integers in args are never
-- re-encoded by cjson. Present? Push, then remove — never remove first: a
-- script stopped by an error keeps the writes made before it, so a remove
-- followed by a failing push (a queue key of the wrong type) would lose the
-- job (docs/wire.md, Scheduled/retry/dead sets). Absent? Another process
-- promoted it first; do nothing, which is also what makes a replay of this
-- call harmless.
-- A unique job (KEYS[5] given) takes its lock again on the way: a job that died
-- gave its lock up, and queued without it a second copy would be accepted
-- beside it. If another jid holds the lock, a copy of the same job is already
-- alive: nothing is pushed and the holder's jid is returned (docs/unique.md).
-- A prioritised job goes to its lane (docs/priority.md): the caller names the lane's list as KEYS[2] and
-- the lane in ARGV[4]; the lane is registered after the push, as every push to a lane does.
-- KEYS[1] = the ZSET, KEYS[2] = queue:<name> or the job's lane LIST, KEYS[3] = queues SET,
-- KEYS[4] = the queue's lanes SET, KEYS[5] = unique:<digest> (optional)
-- ARGV[1] = the member as stored, ARGV[2] = payload to push, ARGV[3] = queue name,
-- ARGV[4] = the job's lane ('' for the queue's own list),
-- ARGV[5] = the job's jid, ARGV[6] = lock TTL (ms) (with KEYS[5])
-- Returns 1 if promoted, 0 if the member was gone, the holder's jid (a string) if its lock is held.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local took_lock = false
if KEYS[5] then
  if redis.call('SET', KEYS[5], ARGV[5], 'NX', 'PX', ARGV[6]) then
    took_lock = true
  else
    local holder = redis.call('GET', KEYS[5])
    if holder ~= ARGV[5] then
      return holder
    end
  end
end
local pushed = redis.pcall('LPUSH', KEYS[2], ARGV[2])
if type(pushed) == 'table' and pushed['err'] then
  -- Nothing moved: a lock taken here with no job behind it would refuse every copy until its TTL.
  if took_lock then
    redis.call('DEL', KEYS[5])
  end
  return pushed
end
if ARGV[4] ~= '' then redis.call('SADD', KEYS[4], ARGV[4]) end
redis.call('ZREM', KEYS[1], ARGV[1])
pcall(redis.call, 'SADD', KEYS[3], ARGV[3])
return 1
