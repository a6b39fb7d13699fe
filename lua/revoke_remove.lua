-- revoke_remove: a revoked job removed from one place it may wait, in that place's slot (Redis Cluster).
-- The second step of a cluster's revoke, one call per place (`schedule`, `retry`, each queue), after the
-- flag (lua/revoke_mark.lua): the same bounded search as revoke.lua (lua/revoke_find_lib.lua). For a queue
-- the job's recovery count goes too (the queue's own hash, same slot). The caller releases the removed
-- jobs' locks afterwards (their own slots). Repeating it finds nothing more.
-- KEYS[1] = the ZSET (schedule, retry) or the queue LIST, KEYS[2] = the queue's orphan-counts HASH (a queue only)
-- ARGV[1] = jid, ARGV[2] = scan bound (entries looked at), ARGV[3] = 'zset' or 'list' (KEYS[1]'s type)
-- Returns the payloads removed.
--@include revoke_find_lib
local jid, bound = ARGV[1], tonumber(ARGV[2])
local removed = {}
local function collect(_job, payload) removed[#removed + 1] = payload end
if ARGV[3] == 'zset' then
  revoke_from_set(KEYS[1], jid, bound, collect)
else
  revoke_from_list(KEYS[1], jid, bound, collect)
end
if #removed > 0 and KEYS[2] then redis.call('HDEL', KEYS[2], jid) end
return removed
