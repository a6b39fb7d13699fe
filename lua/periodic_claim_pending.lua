-- periodic_claim_pending: decide one slot of a periodic entry, its job recorded as pending (Redis Cluster).
-- On one server lua/periodic_claim.lua pushes the job in the same step; on a cluster the queue lives in
-- another slot, so the decision (lua/periodic_lib.lua, the same fence: a slot is decided once) records the
-- job in the entry's state instead, a field per job (`pending:<slot ms>:<jid>` -> "<queue>\n<payload>": a
-- catch-up claims several slots in one tick), and the leader pushes it apart
-- (djwork/worker/cluster/periodic.py: push_once by its jid, then HDEL of the field).
-- A pending job left by a crash is pushed by the leader's next tick: a slot decided is never without its
-- push for longer than that. A no-overlap entry's running lock is named in the state's slot on a cluster
-- (djwork:periodic-running:{<state>}): checked and taken here, as lua/periodic_claim.lua does.
-- KEYS[1] = djwork:periodic:state:<id> HASH, KEYS[2] = its history LIST, djwork:periodic:history:{<state>},
-- KEYS[3] = its running lock STRING, djwork:periodic-running:{<state>} (used only when ARGV[9] is not '')
-- ARGV: as lua/periodic_claim.lua ('now' too).
-- Returns {status, watermark} as lua/periodic_claim.lua.
--@include periodic_lib
return periodic_decide(KEYS[1], KEYS[2], KEYS[3], function(payload)
  redis.call('HSET', KEYS[1], 'pending:' .. ARGV[2] .. ':' .. ARGV[7], ARGV[8] .. '\n' .. payload)
end)
