-- limiter_rate: one decision of a bucket, window, leaky or points limiter, on Redis's clock.
-- Every decision runs here, on TIME, so hosts with skewed clocks share one limit.
-- acquire admits `cost` units or says how long until they would be admitted:
--   bucket: `size` per calendar period (floor(now / interval)); retry at the next period;
--   window: at most `size` admissions in any sliding `interval` (a log of admission times);
--           retry when the oldest admission leaves the window;
--   leaky/points: a level that drains at size/interval per second and may not pass `size`;
--           retry when enough has drained (leaky: cost 1, a burst of `size`, then one drip at a time).
-- A caller that will wait (its wait budget covers the retry) is listed as a waiter until it is
-- admitted or gives up, so status pages can show who waits; waiting itself happens in the
-- caller (it sleeps the returned retry, no polling in between).
-- The limiter registers itself on use: `djwork:limiters` ZSET (name -> expiry), metadata HASH,
-- every key it writes expires after ttl, and each call sweeps a bounded batch of expired names
-- from the registry, so per-tenant names can't grow it without bound (lua/limiter_lib.lua).
-- KEYS[1] = djwork:limiters ZSET (on a Redis Cluster: the metadata HASH again, the name listed apart by
-- lua/limiter_list.lua, so the call is in the limiter's slot), KEYS[2] = metadata HASH, KEYS[3] = stats HASH,
-- KEYS[4] = state: HASH period/used (bucket), HASH level/at (leaky, points), ZSET log (window),
-- KEYS[5] = waiters ZSET token -> arrival, KEYS[6] = waiting HASH token -> "deadline\tidentity\tjid"
-- ARGV[1] = op: acquire | adjust | reset | delete, ARGV[2] = name, ARGV[3] = kind, ARGV[4] = size,
-- ARGV[5] = interval (seconds), ARGV[6] = ttl (seconds), ARGV[7] = token (unique per acquisition),
-- ARGV[8] = cost (acquire: units wanted; adjust: signed correction of an earlier cost),
-- ARGV[9] = wait budget left (seconds), ARGV[10] = identity, ARGV[11] = jid or '',
-- ARGV[12] = registry sweep batch, ARGV[13..] = metadata field/value pairs
-- Returns, for acquire: {status, now, retry_after}: status 1 admitted, 0 not yet (sleep
-- retry_after, then call again with the same token), -1 over the limit within the budget;
-- for adjust: {1, now, level}; for reset/delete (ARGV[3..] unused): {1, now}. Times are strings (seconds).
--@include limiter_lib
local now = clock_now()
local op, name = ARGV[1], ARGV[2]
local k = {meta = KEYS[2], stats = KEYS[3], state = KEYS[4], waiters = KEYS[5], waiting = KEYS[6]}

if op == 'reset' or op == 'delete' then
  redis.call('DEL', k.state)
  if op == 'delete' then
    redis.call('DEL', k.meta, k.stats, k.waiters, k.waiting)
    limiter_unlist(KEYS[1], k, name)
  end
  return {1, limiter_fmt(now)}
end

local kind = ARGV[3]
local size, interval, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local token, cost, budget = ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local ttl_ms = math.ceil(ttl * 1000)

local function drained_level()
  local state = redis.call('HMGET', k.state, 'level', 'at')
  local level, at = tonumber(state[1]) or 0, tonumber(state[2]) or now
  local elapsed = now - at
  if elapsed < 0 then elapsed = 0 end
  level = level - elapsed * size / interval
  if level < 0 then level = 0 end
  return level
end

local function save_level(level)
  redis.call('HSET', k.state, 'level', string.format('%.17g', level), 'at', limiter_fmt(now))
  redis.call('PEXPIRE', k.state, ttl_ms)
end

if op == 'adjust' then
  local level = drained_level() + cost
  if level < 0 then level = 0 end
  save_level(level)
  return {1, limiter_fmt(now), string.format('%.6f', level)}
end

limiter_register(KEYS[1], k, name, ttl, {unpack(ARGV, 13, #ARGV)}, tonumber(ARGV[12]), now)

-- Waiters that died while waiting: drop the few oldest whose deadline is long past.
local oldest = redis.call('ZRANGE', k.waiters, 0, 4)
for i = 1, #oldest do
  local info = redis.call('HGET', k.waiting, oldest[i])
  local deadline = info and tonumber(string.match(info, '^([^\t]*)'))
  if (not deadline) or deadline + LIMITER_GRACE < now then
    limiter_stop_waiting(k, oldest[i])
  end
end

local admitted, retry = false, 0
if kind == 'bucket' then
  local period = math.floor(now / interval) * interval
  local state = redis.call('HMGET', k.state, 'period', 'used')
  local used = 0
  if tonumber(state[1]) == period then used = tonumber(state[2]) or 0 end
  if used + cost <= size then
    admitted = true
    redis.call('HSET', k.state, 'period', string.format('%.17g', period), 'used', used + cost)
    redis.call('PEXPIRE', k.state, ttl_ms)
  else
    retry = period + interval - now
  end
elseif kind == 'window' then
  -- Writes only: a status read counts the window without trimming it.
  redis.call('ZREMRANGEBYSCORE', k.state, '-inf', limiter_fmt(now - interval))
  if redis.call('ZCARD', k.state) + cost <= size then
    admitted = true
    redis.call('ZADD', k.state, now, token)
    redis.call('PEXPIRE', k.state, ttl_ms)
  else
    local first = redis.call('ZRANGE', k.state, 0, 0, 'WITHSCORES')
    retry = tonumber(first[2]) + interval - now
  end
else
  local level = drained_level()
  if level + cost <= size then
    admitted = true
    save_level(level + cost)
  else
    retry = (level + cost - size) * interval / size
  end
end
if retry < 0 then retry = 0 end

local arrival = redis.call('ZSCORE', k.waiters, token)
if admitted then
  limiter_admitted(k, ttl_ms, token, arrival, now)
  return {1, limiter_fmt(now), '0'}
end
if budget >= retry then
  limiter_wait(k, ttl_ms, token, arrival, now, budget, ARGV[10], ARGV[11])
  return {0, limiter_fmt(now), limiter_fmt(retry)}
end
limiter_refused(k, ttl_ms, token, arrival)
return {-1, limiter_fmt(now), limiter_fmt(retry)}
