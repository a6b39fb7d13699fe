-- beat: stamp this process's last heartbeat with Redis's clock.
-- Orphan recovery compares against the same clock, so a host whose clock
-- is off can neither make itself look dead nor keep a dead peer alive.
-- KEYS[1] = djwork:beats ZSET
-- ARGV[1] = identity
-- Returns the stamp (seconds, as a string).
--@include clock_lib
local now = clock_now()
redis.call('ZADD', KEYS[1], now, ARGV[1])
return tostring(now)
