-- revoked_now: which of the given jids are revoked at Redis's time, in djwork:revoked's slot (Redis Cluster).
-- The first step of a cluster worker's drop of a revoked copy (djwork/worker/cluster/revoked.py): read
-- only; the copies are then dropped from their in-progress lists in their queues' slots.
-- KEYS[1] = djwork:revoked ZSET
-- ARGV = the jids
-- Returns the jids revoked now.
--@include clock_lib
--@include result_lib
local now = clock_now()
local revoked = {}
for i = 1, #ARGV do
  if result_revoked(KEYS[1], ARGV[i], now) then revoked[#revoked + 1] = ARGV[i] end
end
return revoked
