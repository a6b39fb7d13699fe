-- periodic_lib: the decision of one slot of a periodic entry (docs/periodic.md), for the scripts that
-- claim one: lua/periodic_claim.lua (one server: the job pushed in the same step) and
-- lua/periodic_claim_pending.lua (Redis Cluster: the job recorded as pending in the entry's state, pushed
-- apart in its queue's slot, docs/cluster.md). A library: djwork/redis/scripts.py puts this text where a
-- script has the line `--@include periodic_lib`. KEYS: none of its own; ARGV: as periodic_claim.lua says.
-- periodic_decide returns the script's reply, {status, watermark}.
--@include clock_lib

-- Decide the slot ARGV names for the entry whose state, history and running lock are the keys given;
-- a fired slot's job (its payload, enqueued_at spliced in on Redis's clock) goes to `push_job`.
local function periodic_decide(state_key, history_key, lock_key, push_job)
  local real = clock_now()
  local now = math.floor((tonumber(ARGV[11]) + (real - tonumber(ARGV[10])) * tonumber(ARGV[12])) * 1000)
  local mode = ARGV[1]
  local state = redis.call('HMGET', state_key, 'last', 'paused')
  local last = tonumber(state[1])
  redis.call('LLEN', history_key)
  local holder = false
  if ARGV[9] ~= '' then
    holder = redis.call('GET', lock_key)
  end
  local real_ms = string.format('%.0f', math.floor(real * 1000))

  local function note(record)
    record['at'] = tonumber(real_ms)
    redis.call('LPUSH', history_key, cjson.encode(record))
    redis.call('LTRIM', history_key, 0, tonumber(ARGV[13]) - 1)
  end

  local function push()
    -- The payload is spliced, not decoded: cjson would turn "args": [] into {}.
    local payload = string.sub(ARGV[6], 1, -2) .. ',"enqueued_at":' .. string.format('%.6f', real) .. '}'
    push_job(payload)
    if ARGV[9] ~= '' then
      redis.call('SET', lock_key, ARGV[7], 'PX', ARGV[9])
    end
    redis.call('HSET', state_key, 'last_jid', ARGV[7], 'last_at', real_ms)
  end

  if mode == 'now' then
    if holder then
      return {'busy', holder}
    end
    push()
    redis.call('HINCRBY', state_key, 'run_now', 1)
    note({kind = 'run-now', jid = ARGV[7]})
    return {'fired', state[1] or ''}
  end

  if not last then
    -- First sight (or the state was deleted): watch from now; nothing before fires.
    local watermark = string.format('%.0f', now)
    redis.call('HSET', state_key, 'last', watermark, 'since', watermark)
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
  redis.call('HSET', state_key, 'last', ARGV[2])
  if status == 'fired' then
    push()
    redis.call('HSET', state_key, 'last_slot', ARGV[2])
    redis.call('HINCRBY', state_key, 'fired', 1)
    if before > 0 then
      redis.call('HINCRBY', state_key, 'skipped_missed', before)
    end
    note({kind = 'slot', slot = slot, jid = ARGV[7], skipped = before})
  elseif status == 'paused' then
    -- Counted, not noted: a paused entry would fill its history with skips.
    redis.call('HINCRBY', state_key, 'skipped_paused', before + 1)
  else
    local reason = ARGV[5]
    if status == 'overlap' then
      reason = 'overlap'
      if before > 0 then
        redis.call('HINCRBY', state_key, 'skipped_missed', before)
      end
      redis.call('HINCRBY', state_key, 'skipped_overlap', 1)
    else
      redis.call('HINCRBY', state_key, 'skipped_' .. reason, before + 1)
    end
    local record = {kind = 'skipped', slot = slot, skipped = before + 1, reason = reason}
    if holder then
      record['holder'] = holder
    end
    note(record)
  end
  return {status, ARGV[2]}
end
