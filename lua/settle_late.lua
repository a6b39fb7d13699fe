-- settle_late: a job finished after its process's shutdown deadline had pushed it back.
-- Its copy must not run a second time: take it off the queue (or the isolated
-- list) if it is still there; if the requeue has not run yet, remove it from
-- the in-progress list as a normal ack would; else its copy has already left
-- (another worker fetched it, or orphan recovery has yet to return it), so
-- mark the jid in djwork:finished-late for fetch.lua to drop the copy it meets.
-- The basic fetch mode passes '' for the in-progress list.
-- KEYS[1] = queue:<name>, KEYS[2] = its isolated LIST, KEYS[3] = in-progress LIST or '',
-- KEYS[4] = djwork:finished-late HASH, KEYS[5] = djwork:orphan-counts HASH
-- ARGV[1] = raw payload, ARGV[2] = jid, ARGV[3] = mark TTL seconds,
-- ARGV[4] = the job's lock keys ("\n"-separated, djwork/job_locks.py): released with "removed" or "acked",
-- as the ack would have; a marked copy keeps them until it is dropped. A b-<bid> line (the job's
-- batch) counts the job as succeeded in every outcome (lua/ties_lib.lua).
-- Returns "removed", "acked", "marked" or (a job without a jid) a sentence saying so.
--@include ties_lib
local payload, jid = ARGV[1], ARGV[2]
local function retire()
  if jid ~= '' then
    redis.call('HDEL', KEYS[5], jid)
    ties_end(ARGV[4] or '', jid, 'ok')
  end
end
if redis.call('LREM', KEYS[1], -1, payload) > 0 or redis.call('LREM', KEYS[2], -1, payload) > 0 then
  retire()
  return 'removed'
end
if KEYS[3] ~= '' and redis.call('LREM', KEYS[3], -1, payload) > 0 then
  retire()
  return 'acked'
end
if jid == '' then
  return 'no jid to mark: its copy may run again'
end
-- It did succeed: its batch counts it now (membership: the copy's own end then counts nothing). Its
-- locks stay with the marked copy until that is dropped.
ties_end(ARGV[4] or '', jid, 'ok', true)
redis.call('HSET', KEYS[4], jid, string.format('%d', clock_read()))
redis.call('EXPIRE', KEYS[4], tonumber(ARGV[3]))
return 'marked'
