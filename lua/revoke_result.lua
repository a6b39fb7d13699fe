-- revoke_result: a revoked job's REVOKED record, in the record's slot (Redis Cluster), unless it finished.
-- The last step of a cluster's revoke (after lua/revoke_mark.lua and lua/revoke_remove.lua) and of a
-- worker's drop of a revoked copy: a SUCCESS or FAILURE record stays, as in revoke.lua; a get() waiting on
-- the job is woken. Repeating it writes the same record.
-- KEYS[1] = the result HASH, KEYS[2] = the job's waiter HASH (jid -> its notify LIST, same slot)
-- ARGV[1] = the jid, ARGV[2] = the REVOKED result spec (djwork/results/record.py)
-- Returns 1 when written, 0 when the job had finished.
--@include result_lib
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'SUCCESS' or state == 'FAILURE' then return 0 end
local guard = result_guard('', KEYS[2])
guard.revoked = false
result_store(guard, KEYS[1], ARGV[2], ARGV[1])
return 1
