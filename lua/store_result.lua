-- store_result: one job's result record written and its get() woken, in the record's slot (Redis Cluster).
-- On one server store_results.lua and the ack write many records in one step with the shared waiters
-- hash and the revoked set; on a cluster each job's record, notify list and waiter share the slot of
-- `djwork:result:<jid>` (docs/cluster.md, Keys), so each job gets a call of its own. The revoked set is in
-- a slot of its own and not read; a REVOKED record is kept instead: every revoke writes it in this slot
-- (lua/revoke_result.lua), so a job revoked while it ran does not have it replaced by its outcome, as one
-- server keeps it (checked here, in the same step as the write: no window between). Repeating it rewrites
-- the same record.
-- KEYS[1] = the result HASH, KEYS[2] = the job's waiter HASH (jid -> its notify LIST, same slot)
-- ARGV[1] = the jid, ARGV[2] = the result spec (djwork/results/record.py)
-- Returns 1, or 0 when a REVOKED record was kept.
--@include result_lib
if redis.pcall('HGET', KEYS[1], 'state') == 'REVOKED' then
  -- A get() registered meanwhile is still woken, to read the REVOKED record.
  local notify = redis.call('HGET', KEYS[2], ARGV[1])
  if notify then
    redis.call('HDEL', KEYS[2], ARGV[1])
    redis.pcall('LPUSH', notify, 'REVOKED')
    redis.pcall('EXPIRE', notify, 60)
  end
  return 0
end
local guard = result_guard('', KEYS[2])
guard.revoked = false
result_store(guard, KEYS[1], ARGV[2], ARGV[1])
return 1
