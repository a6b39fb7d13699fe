-- periodic_claim: decide one slot of a periodic entry and push its job, in one step.
-- The fence of "exactly once per slot": the entry's watermark (the last slot
-- decided, durable in its state hash) is checked and advanced, and the job is
-- pushed, atomically, on Redis's clock. A replay, a second leader or a process
-- whose host clock is wrong can only get 'done' (decided before) or 'early'
-- (not due yet); a slot is never decided twice and never decided without its push.
-- Every key's type is read before the first write: a script stopped by
-- WRONGTYPE keeps what it wrote, and a watermark advanced without its push
-- would lose the run.
-- KEYS[1] = djwork:periodic:state:<id> HASH, KEYS[2] = djwork:periodic:history:<id> LIST,
-- KEYS[3] = queue:<name> LIST, KEYS[4] = queues SET, KEYS[5] = djwork:periodic-running:<id> STRING
-- ARGV[1] = 'init' (start watching: the watermark becomes now) | 'fire' | 'skip' | 'now' (run now: no slot)
-- ARGV[2] = the slot, simulated epoch ms
-- ARGV[3] = due slots before it that this claim skips, ARGV[4] = the oldest of them (ms; '0' if none)
-- ARGV[5] = why 'skip' skips the slot: 'missed' | 'paused' | 'middleware' (client middleware stopped its push)
-- ARGV[6] = the job's JSON object without enqueued_at ('' for init and skip), ARGV[7] = its jid,
-- ARGV[8] = the queue's name, ARGV[9] = running-lock TTL ms ('' = overlap allowed, KEYS[5] untouched)
-- ARGV[10..12] = clock origin, start, speed: simulated = start + (TIME - origin) * speed
-- ARGV[13] = history entries kept
-- Returns {status, watermark}. status: 'fired', 'skipped', 'paused', 'overlap' (the slot is decided),
-- 'done' (decided before), 'early' (not due on Redis's clock), 'initialized', 'busy' (run now refused:
-- the lock's holder is returned in place of the watermark).
--@include clock_lib
local real = clock_now()
local now = math.floor((tonumber(ARGV[11]) + (real - tonumber(ARGV[10])) * tonumber(ARGV[12])) * 1000)
local mode = ARGV[1]
local state = redis.call('HMGET', KEYS[1], 'last', 'paused')
local last = tonumber(state[1])
redis.call('LLEN', KEYS[2])
redis.call('LLEN', KEYS[3])
local holder = false
if ARGV[9] ~= '' then
  holder = redis.call('GET', KEYS[5])
end
local real_ms = string.format('%.0f', math.floor(real * 1000))

local function note(record)
  record['at'] = tonumber(real_ms)
  redis.call('LPUSH', KEYS[2], cjson.encode(record))
  redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[13]) - 1)
end

local function push()
  -- The payload is spliced, not decoded: cjson would turn "args": [] into {}.
  local payload = string.sub(ARGV[6], 1, -2) .. ',"enqueued_at":' .. string.format('%.6f', real) .. '}'
  redis.call('LPUSH', KEYS[3], payload)
  redis.pcall('SADD', KEYS[4], ARGV[8])
  if ARGV[9] ~= '' then
    redis.call('SET', KEYS[5], ARGV[7], 'PX', ARGV[9])
  end
  redis.call('HSET', KEYS[1], 'last_jid', ARGV[7], 'last_at', real_ms)
end

if mode == 'now' then
  if holder then
    return {'busy', holder}
  end
  push()
  redis.call('HINCRBY', KEYS[1], 'run_now', 1)
  note({kind = 'run-now', jid = ARGV[7]})
  return {'fired', state[1] or ''}
end

if not last then
  -- First sight (or the state was deleted): watch from now; nothing before fires.
  local watermark = string.format('%.0f', now)
  redis.call('HSET', KEYS[1], 'last', watermark, 'since', watermark)
  return {'initialized', watermark}
end
if mode == 'init' then
  return {'done', state[1]}
end

local slot = tonumber(ARGV[2])
if slot > now then
  return {'early', state[1]}
end
if slot <= last then
  return {'done', state[1]}
end
-- Slots skipped before this one are counted only when none of them was
-- decided already (by another leader's claim): a count is never doubled.
local before = tonumber(ARGV[3])
if before > 0 and tonumber(ARGV[4]) <= last then
  before = 0
end

local status = 'fired'
if state[2] then
  status = 'paused'
elseif mode == 'skip' then
  status = 'skipped'
elseif holder then
  status = 'overlap'
end
redis.call('HSET', KEYS[1], 'last', ARGV[2])
if status == 'fired' then
  push()
  redis.call('HSET', KEYS[1], 'last_slot', ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'fired', 1)
  if before > 0 then
    redis.call('HINCRBY', KEYS[1], 'skipped_missed', before)
  end
  note({kind = 'slot', slot = slot, jid = ARGV[7], skipped = before})
elseif status == 'paused' then
  -- Counted, not noted: a paused entry would fill its history with skips.
  redis.call('HINCRBY', KEYS[1], 'skipped_paused', before + 1)
else
  local reason = ARGV[5]
  if status == 'overlap' then
    reason = 'overlap'
    if before > 0 then
      redis.call('HINCRBY', KEYS[1], 'skipped_missed', before)
    end
    redis.call('HINCRBY', KEYS[1], 'skipped_overlap', 1)
  else
    redis.call('HINCRBY', KEYS[1], 'skipped_' .. reason, before + 1)
  end
  local record = {kind = 'skipped', slot = slot, skipped = before + 1, reason = reason}
  if holder then
    record['holder'] = holder
  end
  note(record)
end
return {status, ARGV[2]}
