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
-- KEYS[1] = djwork:limiters ZSET, KEYS[2] = djwork:limiter-holdings ZSET (on a Redis Cluster: KEYS[1] the
-- limiter's metadata HASH, its name listed apart by lua/limiter_list.lua, and KEYS[2] the limiter's own
-- holdings ZSET, so the call is in the limiter's slot; op free then names one limiter),
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
--@include limiter_lib
local now = clock_now()
local op = ARGV[1]
local RECLAIM_BATCH = 100
-- A mark in `lost` older than this is dropped: a holder stalled for a day is not waited for.
local LOST_KEPT = 86400

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

local function hold(k, cfg, token, identity, jid)
  redis.call('ZADD', k.holders, now + cfg.lock_timeout, token)
  redis.call('HSET', k.owners, token, identity .. '\t' .. jid .. '\t' .. limiter_fmt(now))
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
  redis.call('ZREMRANGEBYSCORE', k.lost, '-inf', '(' .. limiter_fmt(now - LOST_KEPT))
  redis.call('PEXPIRE', k.lost, math.max(cfg.ttl_ms, LOST_KEPT * 1000))
end

local function reclaim(k, cfg)
  local expired = redis.call('ZRANGEBYSCORE', k.holders, '-inf', '(' .. limiter_fmt(now), 'LIMIT', 0, RECLAIM_BATCH)
  for i = 1, #expired do
    unhold(k, cfg.name, expired[i])
  end
  if #expired > 0 then
    limiter_count(k, cfg.ttl_ms, 'reclaimed', #expired)
    limiter_count(k, cfg.ttl_ms, 'overages', #expired)
  end
  return #expired
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
    limiter_stop_waiting(k, token)
    local deadline, identity, jid
    if info then deadline, identity, jid = string.match(info, '^([^\t]*)\t([^\t]*)\t(.*)$') end
    if deadline and tonumber(deadline) + LIMITER_GRACE >= now then
      hold(k, cfg, token, identity, jid)
      limiter_waited(k, cfg.ttl_ms, arrival, now)
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
        limiter_count(k, cfg.ttl_ms, 'orphaned', 1)
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
    limiter_unlist(KEYS[1], k, name)
    return {#tokens, limiter_fmt(now)}
  end
  return append({#tokens, limiter_fmt(now)}, grant(k, cfg))
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
    limiter_count(k, cfg.ttl_ms, 'held', 1)
    limiter_count(k, cfg.ttl_ms, 'held_us', math.floor(held_for * 1000000))
    -- Past its lease but not reclaimed (nobody asked meanwhile): still an overage, counted once.
    if held_for > cfg.lock_timeout then limiter_count(k, cfg.ttl_ms, 'overages', 1) end
  elseif redis.call('ZREM', k.lost, token) == 1 then
    lost = 1
    limiter_count(k, cfg.ttl_ms, 'overages', 1)
  end
  return append({owner and 1 or 0, limiter_fmt(now), limiter_fmt(held_for), reclaimed, lost}, grant(k, cfg))
end

-- acquire: register (or refresh) on use, sweep a bounded batch of expired names from the registry.
limiter_register(KEYS[1], k, name, tonumber(ARGV[5]), {unpack(ARGV, 11, #ARGV)}, tonumber(ARGV[10]), now)

local identity, jid, budget = ARGV[7], ARGV[8], tonumber(ARGV[9])
local reclaimed = reclaim(k, cfg)
local granted = grant(k, cfg)
local function answer(status, retry, acquired_at)
  return append({status, limiter_fmt(now), limiter_fmt(retry), acquired_at, reclaimed}, granted)
end

local owner = redis.call('HGET', k.owners, token)
if owner then
  return answer(1, 0, string.match(owner, '([^\t]*)$'))
end
local arrival = redis.call('ZSCORE', k.waiters, token)
if redis.call('ZCARD', k.holders) < cfg.size then
  -- grant() ran first, so no live waiter is left ahead of this caller.
  limiter_admitted(k, cfg.ttl_ms, token, arrival, now)
  hold(k, cfg, token, identity, jid)
  return answer(1, 0, limiter_fmt(now))
end
local first = redis.call('ZRANGE', k.holders, 0, 0, 'WITHSCORES')
local retry = cfg.lock_timeout
if #first == 2 then retry = math.max(0, tonumber(first[2]) - now) end
if budget > 0 then
  limiter_wait(k, cfg.ttl_ms, token, arrival, now, budget, identity, jid)
  return answer(0, math.min(retry, budget), '')
end
limiter_refused(k, cfg.ttl_ms, token, arrival)
return answer(-1, retry, '')
