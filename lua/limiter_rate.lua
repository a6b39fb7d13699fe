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
-- from the registry, so per-tenant names can't grow it without bound.
-- KEYS[1] = djwork:limiters ZSET, KEYS[2] = metadata HASH, KEYS[3] = stats HASH,
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
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local op, name = ARGV[1], ARGV[2]
-- A waiter calls again right at its deadline; only one that missed it by this much is gone.
local GRACE = 1

local function fmt(seconds)
  return string.format('%.6f', seconds)
end

if op == 'reset' or op == 'delete' then
  redis.call('DEL', KEYS[4])
  if op == 'delete' then
    redis.call('DEL', KEYS[2], KEYS[3], KEYS[5], KEYS[6])
    redis.call('ZREM', KEYS[1], name)
  end
  return {1, fmt(now)}
end

local kind = ARGV[3]
local size, interval, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local token, cost, budget = ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local ttl_ms = math.ceil(ttl * 1000)

local function count(field, by)
  redis.call('HINCRBY', KEYS[3], field, by)
  redis.call('PEXPIRE', KEYS[3], ttl_ms)
end

local function drained_level()
  local state = redis.call('HMGET', KEYS[4], 'level', 'at')
  local level, at = tonumber(state[1]) or 0, tonumber(state[2]) or now
  local elapsed = now - at
  if elapsed < 0 then elapsed = 0 end
  level = level - elapsed * size / interval
  if level < 0 then level = 0 end
  return level
end

local function save_level(level)
  redis.call('HSET', KEYS[4], 'level', string.format('%.17g', level), 'at', fmt(now))
  redis.call('PEXPIRE', KEYS[4], ttl_ms)
end

if op == 'adjust' then
  local level = drained_level() + cost
  if level < 0 then level = 0 end
  save_level(level)
  return {1, fmt(now), string.format('%.6f', level)}
end

-- Register (or refresh) on use: the registry entry and the metadata live ttl past the last refresh.
local config = table.concat(ARGV, '|', 13, #ARGV)
local expires = now + ttl
local slack = math.min(ttl / 10, 3600)
local listed = redis.call('ZSCORE', KEYS[1], name)
if (not listed) or tonumber(listed) < expires - slack or redis.call('HGET', KEYS[2], 'config') ~= config then
  redis.call('ZADD', KEYS[1], expires, name)
  redis.call('HSET', KEYS[2], 'config', config, unpack(ARGV, 13, #ARGV))
  redis.call('HSETNX', KEYS[2], 'created_at', fmt(now))
  redis.call('PEXPIRE', KEYS[2], ttl_ms)
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. fmt(now), 'LIMIT', 0, tonumber(ARGV[12]))
if #expired > 0 then
  redis.call('ZREM', KEYS[1], unpack(expired))
end

-- Waiters that died while waiting: drop the few oldest whose deadline is long past.
local oldest = redis.call('ZRANGE', KEYS[5], 0, 4)
for i = 1, #oldest do
  local info = redis.call('HGET', KEYS[6], oldest[i])
  local deadline = info and tonumber(string.match(info, '^([^\t]*)'))
  if (not deadline) or deadline + GRACE < now then
    redis.call('ZREM', KEYS[5], oldest[i])
    redis.call('HDEL', KEYS[6], oldest[i])
  end
end

local admitted, retry = false, 0
if kind == 'bucket' then
  local period = math.floor(now / interval) * interval
  local state = redis.call('HMGET', KEYS[4], 'period', 'used')
  local used = 0
  if tonumber(state[1]) == period then used = tonumber(state[2]) or 0 end
  if used + cost <= size then
    admitted = true
    redis.call('HSET', KEYS[4], 'period', string.format('%.17g', period), 'used', used + cost)
    redis.call('PEXPIRE', KEYS[4], ttl_ms)
  else
    retry = period + interval - now
  end
elseif kind == 'window' then
  -- Writes only: a status read counts the window without trimming it.
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', fmt(now - interval))
  if redis.call('ZCARD', KEYS[4]) + cost <= size then
    admitted = true
    redis.call('ZADD', KEYS[4], now, token)
    redis.call('PEXPIRE', KEYS[4], ttl_ms)
  else
    local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
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

local arrival = redis.call('ZSCORE', KEYS[5], token)
local function stop_waiting()
  redis.call('ZREM', KEYS[5], token)
  redis.call('HDEL', KEYS[6], token)
end
if admitted then
  if arrival then
    stop_waiting()
    count('waited', 1)
    count('wait_us', math.floor((now - tonumber(arrival)) * 1000000))
  else
    count('immediate', 1)
  end
  return {1, fmt(now), '0'}
end
if budget >= retry then
  if not arrival then redis.call('ZADD', KEYS[5], now, token) end
  redis.call('HSET', KEYS[6], token, fmt(now + budget) .. '\t' .. ARGV[10] .. '\t' .. ARGV[11])
  redis.call('PEXPIRE', KEYS[5], ttl_ms)
  redis.call('PEXPIRE', KEYS[6], ttl_ms)
  return {0, fmt(now), fmt(retry)}
end
if arrival then stop_waiting() end
count('over', 1)
return {-1, fmt(now), fmt(retry)}
