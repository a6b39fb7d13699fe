-- store_result: one job's result record written and its get() woken, in the record's slot (Redis Cluster).
-- On one server store_results.lua and the ack write many records in one step with the shared waiters
-- hash and the revoked set; on a cluster each job's record, notify list and waiter share the slot of
-- `djwork:result:<jid>` (docs/cluster.md, Keys), so each job gets a call of its own. The revoked set is in
-- a slot of its own and not read: a job revoked while it ran has its REVOKED record replaced by its
-- outcome (one server keeps REVOKED). Repeating it rewrites the same record.
-- KEYS[1] = the result HASH, KEYS[2] = the job's waiter HASH (jid -> its notify LIST, same slot)
-- ARGV[1] = the jid, ARGV[2] = the result spec (djwork/results/record.py)
-- Returns 1.
--@include result_lib
local guard = result_guard('', KEYS[2])
guard.revoked = false
result_store(guard, KEYS[1], ARGV[2], ARGV[1])
return 1
