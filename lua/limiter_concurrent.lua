-- limiter_concurrent: one decision of a concurrent limiter (at most `size` holders at once), on Redis's clock.
-- A slot is held by a token on behalf of (process identity, jid): `holders` ZSET token -> lease
-- end (acquired + lock_timeout), `owners` HASH token -> "identity\tjid\tacquired_at", and one entry
-- "identity\tname\ttoken" in the global holdings index (a ZSET of equal scores, read by lex range),
-- so the slots of a dead process are found without a scan. A lease that runs out is reclaimed by
-- the next call (counted as reclaimed and as an overage: the limit was breached by a live holder,
-- or a dead one nobody freed). Waiters queue in arrival order (`waiters` ZSET token -> arrival,
-- `waiting` HASH token -> "deadline\tidentity\tjid"); whenever a slot frees, the oldest waiter is
-- granted it here and then, so a newcomer can't take it first, and the grant is returned for the
-- caller to wake that waiter (LPUSH to its own wake list, which it BLPOPs).
-- A slot freed under a live holder (its process taken for dead while it was stalled, or a reset) is
-- marked in `lost` (ZSET token -> when); the holder's release finds the mark and counts the overage
-- then, once: the limit was exceeded while it ran on beside the slot's new holder. A release without
-- a mark (a replay) counts nothing, and a reclaimed slot was counted at its reclaim.
-- KEYS[1] = djwork:limiters ZSET, KEYS[2] = djwork:limiter-holdings ZSET,
-- then seven keys per limiter g = 1..n: KEYS[2+7g-6..2+7g] = metadata HASH, stats HASH,
-- holders ZSET, owners HASH, waiters ZSET, waiting HASH, lost ZSET (n = 1 except for op free)
-- ARGV[1] = op:
--   acquire: ARGV[2] = name, [3] = size, [4] = lock_timeout, [5] = ttl, [6] = token, [7] = identity,
--            [8] = jid or '', [9] = wait budget left (seconds), [10] = registry sweep batch,
--            [11..] = metadata field/value pairs
--   release: ARGV[2] = name, [3] = size, [4] = lock_timeout, [5] = ttl, [6] = token,
--            [7] = acquired_at (the time acquire returned)
--   free:    ARGV[2] = identity, ARGV[2+g] = name of limiter g: frees every slot the identity holds
--   reset | delete: ARGV[2] = name
-- Returns (times as strings, seconds):
--   acquire: {status, now, retry_after, acquired_at, reclaimed, granted token...}; status 1 held,
--            0 queued (wait up to retry_after, then call again with the same token), -1 over the limit;
--            a token already holding (granted meanwhile, or a replayed call) answers 1
--   release: {1 if it still held the slot else 0, now, seconds held, reclaimed,
--            1 if its slot had been freed under it (counted now as an overage) else 0, granted token...}
--   free:    {freed, left (holdings of limiters not in KEYS), granted name, granted token, ...}
--   reset:   {freed, now, granted token...}; delete: {freed, now}
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local op = ARGV[1]
-- A waiter calls again right at its deadline; only one that missed it by this much is gone.
local GRACE = 1
local RECLAIM_BATCH = 100
-- A mark in `lost` older than this is dropped: a holder stalled for a day is not waited for.
local LOST_KEPT = 86400

local function fmt(seconds)
  return string.format('%.6f', seconds)
end

local function keys_of(g)
  local base = 2 + 7 * (g - 1)
  return {meta = KEYS[base + 1], stats = KEYS[base + 2], holders = KEYS[base + 3],
          owners = KEYS[base + 4], waiters = KEYS[base + 5], waiting = KEYS[base + 6], lost = KEYS[base + 7]}
end

-- cfg = {name, size, lock_timeout, ttl_ms}; nil fields when the metadata is gone (expired or deleted).
local function cfg_from_meta(k, name)
  local meta = redis.call('HMGET', k.meta, 'size', 'lock_timeout', 'ttl')
  local ttl = tonumber(meta[3])
  return {name = name, size = tonumber(meta[1]), lock_timeout = tonumber(meta[2]),
          ttl_ms = ttl and math.ceil(ttl * 1000)}
end

local function count(k, cfg, field, by)
  -- Without a ttl (metadata gone) a new stats key would never expire: skip the count.
  if cfg.ttl_ms then
    redis.call('HINCRBY', k.stats, field, by)
    redis.call('PEXPIRE', k.stats, cfg.ttl_ms)
  end
end

local function hold(k, cfg, token, identity, jid)
  redis.call('ZADD', k.holders, now + cfg.lock_timeout, token)
  redis.call('HSET', k.owners, token, identity .. '\t' .. jid .. '\t' .. fmt(now))
  redis.call('ZADD', KEYS[2], 0, identity .. '\t' .. cfg.name .. '\t' .. token)
  redis.call('PEXPIRE', k.holders, cfg.ttl_ms)
  redis.call('PEXPIRE', k.owners, cfg.ttl_ms)
end

-- Drops a holding; returns its owner entry (nil if the token held nothing).
local function unhold(k, name, token)
  local owner = redis.call('HGET', k.owners, token)
  redis.call('ZREM', k.holders, token)
  redis.call('HDEL', k.owners, token)
  if owner then
    local identity = string.match(owner, '^([^\t]*)')
    redis.call('ZREM', KEYS[2], identity .. '\t' .. name .. '\t' .. token)
  end
  return owner
end

-- A live holder may still be running under `token`: its release counts the overage (see above).
local function mark_lost(k, cfg, token)
  if not cfg.ttl_ms then return end  -- metadata gone: a key made now would never expire
  redis.call('ZADD', k.lost, now, token)
  redis.call('ZREMRANGEBYSCORE', k.lost, '-inf', '(' .. fmt(now - LOST_KEPT))
  redis.call('PEXPIRE', k.lost, math.max(cfg.ttl_ms, LOST_KEPT * 1000))
end

local function reclaim(k, cfg)
  local expired = redis.call('ZRANGEBYSCORE', k.holders, '-inf', '(' .. fmt(now), 'LIMIT', 0, RECLAIM_BATCH)
  for i = 1, #expired do
    unhold(k, cfg.name, expired[i])
  end
  if #expired > 0 then
    count(k, cfg, 'reclaimed', #expired)
    count(k, cfg, 'overages', #expired)
  end
  return #expired
end

local function stop_waiting(k, token)
  redis.call('ZREM', k.waiters, token)
  redis.call('HDEL', k.waiting, token)
end

-- Free slots go to the oldest live waiters, here and now; returns the tokens granted.
local function grant(k, cfg)
  local granted = {}
  if not cfg.size or not cfg.lock_timeout or not cfg.ttl_ms then return granted end
  local free = cfg.size - redis.call('ZCARD', k.holders)
  while free > 0 do
    local head = redis.call('ZRANGE', k.waiters, 0, 0, 'WITHSCORES')
    if #head == 0 then break end
    local token, arrival = head[1], tonumber(head[2])
    local info = redis.call('HGET', k.waiting, token)
    stop_waiting(k, token)
    local deadline, identity, jid
    if info then deadline, identity, jid = string.match(info, '^([^\t]*)\t([^\t]*)\t(.*)$') end
    if deadline and tonumber(deadline) + GRACE >= now then
      hold(k, cfg, token, identity, jid)
      count(k, cfg, 'waited', 1)
      count(k, cfg, 'wait_us', math.floor((now - arrival) * 1000000))
      granted[#granted + 1] = token
      free = free - 1
    end
  end
  return granted
end

local function append(out, list)
  for i = 1, #list do out[#out + 1] = list[i] end
  return out
end

if op == 'free' then
  local identity = ARGV[2]
  local groups = {}
  for g = 1, (#KEYS - 2) / 7 do groups[ARGV[2 + g]] = g end
  local entries = redis.call('ZRANGEBYLEX', KEYS[2], '[' .. identity .. '\t', '[' .. identity .. '\t\255')
  local freed, left, touched = 0, 0, {}
  for i = 1, #entries do
    local name, token = string.match(entries[i], '^[^\t]*\t([^\t]*)\t(.*)$')
    local g = name and groups[name]
    if g then
      local k = keys_of(g)
      local cfg = cfg_from_meta(k, name)
      -- The index entry goes even when the limiter's keys expired under it.
      redis.call('ZREM', KEYS[2], entries[i])
      if unhold(k, name, token) then
        count(k, cfg, 'orphaned', 1)
        mark_lost(k, cfg, token)  -- taken for dead: a stalled one comes back and releases
        freed = freed + 1
      end
      touched[g] = cfg
    else
      left = left + 1
    end
  end
  local out = {freed, left}
  for g, cfg in pairs(touched) do
    local granted = grant(keys_of(g), cfg)
    for i = 1, #granted do
      out[#out + 1] = cfg.name
      out[#out + 1] = granted[i]
    end
  end
  return out
end

local k = keys_of(1)
local name = ARGV[2]

if op == 'reset' or op == 'delete' then
  local cfg = cfg_from_meta(k, name)
  local tokens = redis.call('ZRANGE', k.holders, 0, -1)
  for i = 1, #tokens do
    unhold(k, name, tokens[i])
    if op == 'reset' then mark_lost(k, cfg, tokens[i]) end
  end
  -- Owners without a lease (never, unless edited by hand) would keep index entries alive.
  local owners = redis.call('HKEYS', k.owners)
  for i = 1, #owners do unhold(k, name, owners[i]) end
  if op == 'delete' then
    redis.call('DEL', k.meta, k.stats, k.holders, k.owners, k.waiters, k.waiting, k.lost)
    redis.call('ZREM', KEYS[1], name)
    return {#tokens, fmt(now)}
  end
  return append({#tokens, fmt(now)}, grant(k, cfg))
end

local cfg = {name = name, size = tonumber(ARGV[3]), lock_timeout = tonumber(ARGV[4]),
             ttl_ms = math.ceil(tonumber(ARGV[5]) * 1000)}
local token = ARGV[6]

if op == 'release' then
  local acquired_at = tonumber(ARGV[7]) or now
  local held_for = now - acquired_at
  -- Its own holding first: reclaim() would take a lapsed lease of this very caller for someone else's.
  local owner = unhold(k, name, token)
  local reclaimed = reclaim(k, cfg)
  local lost = 0
  if owner then
    count(k, cfg, 'held', 1)
    count(k, cfg, 'held_us', math.floor(held_for * 1000000))
    -- Past its lease but not reclaimed (nobody asked meanwhile): still an overage, counted once.
    if held_for > cfg.lock_timeout then count(k, cfg, 'overages', 1) end
  elseif redis.call('ZREM', k.lost, token) == 1 then
    lost = 1
    count(k, cfg, 'overages', 1)
  end
  return append({owner and 1 or 0, fmt(now), fmt(held_for), reclaimed, lost}, grant(k, cfg))
end

-- acquire: register (or refresh) on use, sweep a bounded batch of expired names from the registry.
local ttl = tonumber(ARGV[5])
local config = table.concat(ARGV, '|', 11, #ARGV)
local expires = now + ttl
local slack = math.min(ttl / 10, 3600)
local listed = redis.call('ZSCORE', KEYS[1], name)
if (not listed) or tonumber(listed) < expires - slack or redis.call('HGET', k.meta, 'config') ~= config then
  redis.call('ZADD', KEYS[1], expires, name)
  redis.call('HSET', k.meta, 'config', config, unpack(ARGV, 11, #ARGV))
  redis.call('HSETNX', k.meta, 'created_at', fmt(now))
  redis.call('PEXPIRE', k.meta, cfg.ttl_ms)
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. fmt(now), 'LIMIT', 0, tonumber(ARGV[10]))
if #expired > 0 then
  redis.call('ZREM', KEYS[1], unpack(expired))
end

local identity, jid, budget = ARGV[7], ARGV[8], tonumber(ARGV[9])
local reclaimed = reclaim(k, cfg)
local granted = grant(k, cfg)
local function answer(status, retry, acquired_at)
  return append({status, fmt(now), fmt(retry), acquired_at, reclaimed}, granted)
end

local owner = redis.call('HGET', k.owners, token)
if owner then
  return answer(1, 0, string.match(owner, '([^\t]*)$'))
end
local arrival = redis.call('ZSCORE', k.waiters, token)
if redis.call('ZCARD', k.holders) < cfg.size then
  -- grant() ran first, so no live waiter is left ahead of this caller.
  if arrival then
    stop_waiting(k, token)
    count(k, cfg, 'waited', 1)
    count(k, cfg, 'wait_us', math.floor((now - tonumber(arrival)) * 1000000))
  else
    count(k, cfg, 'immediate', 1)
  end
  hold(k, cfg, token, identity, jid)
  return answer(1, 0, fmt(now))
end
local first = redis.call('ZRANGE', k.holders, 0, 0, 'WITHSCORES')
local retry = cfg.lock_timeout
if #first == 2 then retry = math.max(0, tonumber(first[2]) - now) end
if budget > 0 then
  if not arrival then redis.call('ZADD', k.waiters, now, token) end
  redis.call('HSET', k.waiting, token, fmt(now + budget) .. '\t' .. identity .. '\t' .. jid)
  redis.call('PEXPIRE', k.waiters, cfg.ttl_ms)
  redis.call('PEXPIRE', k.waiting, cfg.ttl_ms)
  return answer(0, math.min(retry, budget), '')
end
if arrival then stop_waiting(k, token) end
count(k, cfg, 'over', 1)
return answer(-1, retry, '')
