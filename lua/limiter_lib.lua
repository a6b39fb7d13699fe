-- limiter_lib: what every limiter kind does alike (docs/limiters.md): its registry entry and the sweep of
-- expired names, its counters, and its waiting list. For limiter_rate.lua and limiter_concurrent.lua.
-- A library: djwork/redis/scripts.py puts this text where a script has the line `--@include limiter_lib`.
-- KEYS and ARGV: none of its own; its functions take a limiter's keys as a table `k` (meta, stats,
-- waiters, waiting) from their caller. Returns nothing.
--
-- A waiter is listed in `waiters` (ZSET token -> arrival) and `waiting` (HASH token ->
-- "deadline\tidentity\tjid") until it is admitted or gives up, so status pages can show who waits.
--@include clock_lib

-- A waiter calls again right at its deadline; only one that missed it by this much is gone.
local LIMITER_GRACE = 1

local function limiter_fmt(seconds)
  return string.format('%.6f', seconds)
end

-- A bounded batch (`sweep`) of expired names leaves the registry, so per-tenant names can't grow it
-- without bound.
local function limiter_sweep(registry, sweep, now)
  local expired = redis.call('ZRANGEBYSCORE', registry, '-inf', '(' .. limiter_fmt(now), 'LIMIT', 0, sweep)
  if #expired > 0 then
    redis.call('ZREM', registry, unpack(expired))
  end
end

-- Register (or refresh) `name` on use: the registry entry and the metadata live ttl past the last
-- refresh, rewritten only when the entry is due (a tenth of the ttl, an hour at most) or the config
-- changed; then the registry is swept. `fields`: the metadata's field/value pairs.
-- On a Redis Cluster the registry is in a slot of its own: the caller passes the metadata key as
-- `registry`, lists the name in a step of its own (lua/limiter_list.lua), and the refresh is decided by
-- the metadata's remaining ttl instead of the registry's score.
local function limiter_register(registry, k, name, ttl, fields, sweep, now)
  local apart = registry == k.meta
  local config = table.concat(fields, '|')
  local expires = now + ttl
  local slack = math.min(ttl / 10, 3600)
  local listed
  if apart then
    local left = redis.call('PTTL', k.meta)
    if left > 0 then listed = now + left / 1000 end
  else
    listed = redis.call('ZSCORE', registry, name)
  end
  if (not listed) or tonumber(listed) < expires - slack or redis.call('HGET', k.meta, 'config') ~= config then
    if not apart then redis.call('ZADD', registry, expires, name) end
    redis.call('HSET', k.meta, 'config', config, unpack(fields))
    redis.call('HSETNX', k.meta, 'created_at', limiter_fmt(now))
    redis.call('PEXPIRE', k.meta, math.ceil(ttl * 1000))
  end
  if not apart then limiter_sweep(registry, sweep, now) end
end

-- A delete takes the name off the registry (nothing to do when the registry is listed apart: a cluster's
-- delete unlists it in a step of its own, and the metadata key is gone already).
local function limiter_unlist(registry, k, name)
  if registry ~= k.meta then redis.call('ZREM', registry, name) end
end

-- Add `by` to a counter. Without a ttl (the metadata is gone) a new stats key would never expire: skipped.
local function limiter_count(k, ttl_ms, field, by)
  if ttl_ms then
    redis.call('HINCRBY', k.stats, field, by)
    redis.call('PEXPIRE', k.stats, ttl_ms)
  end
end

local function limiter_stop_waiting(k, token)
  redis.call('ZREM', k.waiters, token)
  redis.call('HDEL', k.waiting, token)
end

-- A waiter admitted: counted, with how long it waited since its `arrival`.
local function limiter_waited(k, ttl_ms, arrival, now)
  limiter_count(k, ttl_ms, 'waited', 1)
  limiter_count(k, ttl_ms, 'wait_us', math.floor((now - tonumber(arrival)) * 1000000))
end

-- A caller admitted now: off the waiting list if it was on it (`arrival`: its score there, or nil).
local function limiter_admitted(k, ttl_ms, token, arrival, now)
  if arrival then
    limiter_stop_waiting(k, token)
    limiter_waited(k, ttl_ms, arrival, now)
  else
    limiter_count(k, ttl_ms, 'immediate', 1)
  end
end

-- A caller that will wait: listed (its first arrival kept) until `now + budget`.
local function limiter_wait(k, ttl_ms, token, arrival, now, budget, identity, jid)
  if not arrival then redis.call('ZADD', k.waiters, now, token) end
  redis.call('HSET', k.waiting, token, limiter_fmt(now + budget) .. '\t' .. identity .. '\t' .. jid)
  redis.call('PEXPIRE', k.waiters, ttl_ms)
  redis.call('PEXPIRE', k.waiting, ttl_ms)
end

-- A caller refused within its budget: off the waiting list, counted as over the limit.
local function limiter_refused(k, ttl_ms, token, arrival)
  if arrival then limiter_stop_waiting(k, token) end
  limiter_count(k, ttl_ms, 'over', 1)
end
