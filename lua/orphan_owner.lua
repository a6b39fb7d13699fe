-- orphan_owner: is the process `identity` dead, on Redis's clock? If so its beat is removed (Redis Cluster).
-- The first step of a cluster's orphan recovery (recover_orphans.lua decides and moves in one step on
-- one server; a cluster's beats live in another slot than the queue). A crash after this step leaves
-- no beat, which the next pass reads as dead too, and recovers the list then.
-- KEYS[1] = djwork:beats ZSET
-- ARGV[1] = identity, ARGV[2] = orphan threshold (seconds)
-- Returns 1 when the owner is dead (its beat removed or absent), 0 when it beats.
--@include clock_lib
local beat = redis.call('ZSCORE', KEYS[1], ARGV[1])
if beat and clock_now() - tonumber(beat) < tonumber(ARGV[2]) then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
