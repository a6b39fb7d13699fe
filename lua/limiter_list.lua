-- limiter_list: a limiter's name listed in the registry, on a Redis Cluster (its own slot), the registry swept.
-- One server lists it inside the admission's script (lua/limiter_lib.lua, limiter_register); on a cluster
-- the registry and the limiter's keys are in different slots, so the listing is a step of its own that
-- runs before the admission: a crash between leaves a listed limiter nobody holds, which is what an idle
-- one is, and which expires from the registry by its ttl. Repeating it is one ZADD of the same name.
-- KEYS[1] = djwork:limiters ZSET
-- ARGV[1] = name, ARGV[2] = ttl (seconds), ARGV[3] = registry sweep batch
-- Returns 1.
--@include limiter_lib
local now = clock_now()
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
limiter_sweep(KEYS[1], tonumber(ARGV[3]), now)
return 1
