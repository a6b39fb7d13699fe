-- fetch: settle finished jobs and take up to `limit` new ones, in one round trip.
-- Acks first (LREM from this process's in-progress list, and retire the job's
-- orphan-recovery counter if any job has one), then, in the order given, move
-- jobs from each queue: reliable mode moves them into the queue's in-progress
-- list (as LMOVE would, a batch at a time), so a process killed mid-job leaves
-- its work where orphan recovery finds it; basic mode RPOPs (Sidekiq's BRPOP
-- semantics: a crash loses the job).
-- Paused queues (the `paused` SET) are skipped and reported, their lanes with them.
--
-- A queue's priority lanes (docs/priority.md) are taken around it: the lanes above its own list first,
-- highest first, then its own list, then the lanes below it. Only the lanes its lanes SET names are read,
-- and that SET is one more key in the one EXISTS below: a queue that never had a prioritised job costs
-- nothing more. A lane found empty is unregistered here (a push registers it again after pushing).
--
-- A queue's isolated list holds jobs recovered from dead processes more than
-- once (reaper.py): at most `isolated` of them are taken per call (the caller
-- passes 0 while it runs one), so a job that kills its process is the only
-- suspect in the next crash and bystanders stop being blamed with it.
--
-- Every command on a queue's keys runs under pcall: a key of the wrong type
-- (SET queue:default x) fails that queue alone, reported back so the key
-- guard can move it aside, instead of failing the whole script and starving
-- every other queue of the worker.
--
-- A job that finished after its process's shutdown deadline pushed it back
-- is listed in djwork:finished-late; its copy is dropped here (and reported)
-- rather than run a second time (lua/drop_lib.lua). Nothing per call while the
-- hash is empty (the rare keys' EXISTS).
--
-- A revoked job (djwork:revoked, docs/celery.md) that is fetched anyway (revoked while on its way
-- here, or missed by the revoke's bounded search) is dropped the same way: its locks released, its
-- batch told it died (lua/revoke_lib.lua). Nothing per call while nothing is revoked.
--
-- An ack ends the job's ties (its locks and its batch, lua/ties_lib.lua) and may carry the job's
-- result (docs/celery.md): written into its result HASH in this same step (lua/result_lib.lua), so
-- storing a result costs no round trip of its own.
--
-- KEYS[1] = paused SET, KEYS[2] = djwork:orphan-counts HASH, KEYS[3] = djwork:finished-late HASH,
-- KEYS[4] = djwork:revoked ZSET, KEYS[5] = djwork:result-waiters HASH,
-- KEYS[5+4i-3] = queue:<name_i>, KEYS[5+4i-2] = its in-progress LIST, KEYS[5+4i-1] = its isolated LIST,
-- KEYS[5+4i] = its lanes SET (the priority lanes that may hold jobs, lua/lane_lib.lua)
-- ARGV[1] = limit, ARGV[2] = "reliable" | "basic", ARGV[3] = number of acks a,
-- ARGV[4] = isolated jobs that may be taken, ARGV[4+i] = name_i (i = 1..n, in the order of KEYS),
-- then a acks, each either a pair (queue index i, raw payload) for a job with no locks and no result,
-- or a sextuple (-i, raw payload, jid, the job's lock keys ("\n"-separated, '' for none:
-- locks bound to the job's life, released with its ack if it still owns them, djwork/job_locks.py;
-- a b-<bid> line among them is the job's batch, which counts it as succeeded, docs/batches.md),
-- its result HASH key and its result spec ('', '' for none)). The pair keeps the common
-- ack to two arguments: every argument costs the worker its packing and Redis a Lua string.
-- Returns {{i1, payload1, ...}, {paused names...}, {broken key, error, ...}, {skipped jids...},
-- {revoked payloads dropped...}}; an index is negative for a job taken from the isolated list.
--@include drop_lib
--@include revoke_lib
--@include lane_lib
local limit = tonumber(ARGV[1])
local reliable = ARGV[2] == 'reliable'
local ack_count = tonumber(ARGV[3])
local isolated_allowed = tonumber(ARGV[4])
local queue_count = (#KEYS - 5) / 4
local broken = {}

local function failed(reply, ...)
  if type(reply) == 'table' and reply['err'] then
    for _, key in ipairs({...}) do
      broken[#broken + 1] = key
      broken[#broken + 1] = reply['err']
    end
    return true
  end
  return false
end

local function in_progress_of(index)
  return KEYS[5 + 4 * math.abs(index) - 2]
end

-- One EXISTS over the keys that are nearly always absent (the paused SET, orphan counts, finished-late
-- marks, revokes, every isolated list and lanes SET): while it answers 0, their checks below cost nothing more.
-- Each was a command of its own per call, and inside a script every command has a fixed cost.
local rare = {KEYS[1], KEYS[2], KEYS[3], KEYS[4]}
for i = 1, queue_count do
  rare[#rare + 1] = KEYS[5 + 4 * i - 1]
  rare[#rare + 1] = KEYS[5 + 4 * i]
end
local rare_present = redis.pcall('EXISTS', unpack(rare))
rare_present = type(rare_present) ~= 'number' or rare_present > 0

-- The acks: each finished job off its in-progress list, its orphan count retired, its ties ended as a
-- success (lua/ties_lib.lua) and its result written (lua/result_lib.lua).
local function settle_acks()
  local position = 5 + queue_count
  local guard = result_guard(KEYS[4], KEYS[5])
  -- Only a job recovered from a dead process has an orphan count: while none has (the hash is absent,
  -- nearly always), one EXISTS per call replaces an HDEL per ack.
  local orphans = rare_present and redis.pcall('EXISTS', KEYS[2]) ~= 0
  -- Queue positions looked up by their text: tonumber() would run strtod once per ack.
  local position_of, long_position_of = {}, {}
  for i = 1, queue_count do
    position_of[tostring(i)] = i
    long_position_of[tostring(-i)] = i
  end
  for _ = 1, ack_count do
    local token = ARGV[position]
    local index = position_of[token]
    local long = not index
    if long then index = long_position_of[token] or -tonumber(token) end
    local raw = ARGV[position + 1]
    if reliable then
      -- '-1', not -1: a Lua number argument is formatted with printf for every call.
      failed(redis.pcall('LREM', in_progress_of(index), '-1', raw), in_progress_of(index))
    end
    if long then
      local jid = ARGV[position + 2]
      if jid ~= '' then
        if orphans then
          failed(redis.pcall('HDEL', KEYS[2], jid), KEYS[2])
        end
        if ARGV[position + 3] ~= '' then
          ties_end(ARGV[position + 3], jid, 'ok')  -- its locks, and its batch
        end
      end
      if ARGV[position + 4] ~= '' then
        result_store(guard, ARGV[position + 4], ARGV[position + 5], jid)
      end
      position = position + 6
    else
      if orphans then
        -- Only while some recovered job has a count: its jid from the payload, as recover_orphans keys it.
        local jid = job_decode(raw)
        if jid then failed(redis.pcall('HDEL', KEYS[2], jid), KEYS[2]) end
      end
      position = position + 2
    end
  end
end

-- Up to `want` jobs of `source` (queue i's own list, or one of its lanes), oldest first: reliable mode moves
-- them onto queue i's in-progress list, basic mode pops them. The whole batch in three commands, not one LMOVE per job: read the oldest (rightmost)
-- jobs, push them onto the in-progress list in the order LMOVE would have, then cut them off the queue.
-- A refused push (a key of the wrong type) happens before the cut, so nothing is lost.
local function take(i, want, source)
  local queue_key, in_progress_key = source, in_progress_of(i)
  if not reliable then
    local batch = redis.pcall('RPOP', queue_key, want)
    if failed(batch, queue_key) or not batch then return {} end
    return batch
  end
  local batch = redis.pcall('LRANGE', queue_key, -want, -1)
  if failed(batch, queue_key) or #batch == 0 then return {} end
  local oldest_first = {}
  for j = #batch, 1, -1 do oldest_first[#oldest_first + 1] = batch[j] end
  if failed(redis.pcall('LPUSH', in_progress_key, unpack(oldest_first)), in_progress_key) then return {} end
  redis.call('LTRIM', queue_key, 0, -(#batch + 1))
  return oldest_first
end

-- At most one job of queue i's isolated list (reliable mode only), or nil.
local function take_isolated(i)
  local isolated_key, in_progress_key = KEYS[5 + 4 * i - 1], in_progress_of(i)
  local payload = redis.pcall('LMOVE', isolated_key, in_progress_key, 'RIGHT', 'LEFT')
  if failed(payload, isolated_key, in_progress_key) then return nil end
  return payload or nil
end

-- The fetched (index, payload) pairs that `drop` does not drop.
local function kept_after(fetched, drop)
  local kept = {}
  for j = 1, #fetched, 2 do
    if not drop(fetched[j], fetched[j + 1]) then
      kept[#kept + 1] = fetched[j]
      kept[#kept + 1] = fetched[j + 1]
    end
  end
  return kept
end

if ack_count > 0 then settle_acks() end

local fetched = {}
local paused = {}
local taken = 0
for i = 1, queue_count do
  if taken >= limit then break end
  local name = ARGV[4 + i]
  local is_paused = rare_present and redis.pcall('SISMEMBER', KEYS[1], name) or 0
  if failed(is_paused, KEYS[1]) then is_paused = 0 end
  if is_paused == 1 then
    paused[#paused + 1] = name
  else
    if reliable and isolated_allowed > 0 and rare_present then
      local payload = take_isolated(i)
      if payload then
        fetched[#fetched + 1] = -i
        fetched[#fetched + 1] = payload
        taken = taken + 1
        isolated_allowed = isolated_allowed - 1
      end
    end
    local upper, lower = {}, {}
    if rare_present and taken < limit then
      local error
      upper, lower, error = lanes_registered(KEYS[5 + 4 * i], name)
      if failed(error, KEYS[5 + 4 * i]) then upper, lower = {}, {} end
    end
    local function take_from(source, lane)
      if taken >= limit then return end
      local want = limit - taken
      local batch = take(i, want, source)
      for _, payload in ipairs(batch) do
        fetched[#fetched + 1] = i
        fetched[#fetched + 1] = payload
      end
      taken = taken + #batch
      -- Fewer than asked for: the lane may be empty now. LLEN says so for sure (a refused move took nothing
      -- and left the jobs there, which must stay registered).
      if lane and #batch < want and redis.pcall('LLEN', source) == 0 then
        redis.pcall('SREM', KEYS[5 + 4 * i], lane[2])
      end
    end
    for _, lane in ipairs(upper) do take_from(lane[3], lane) end
    take_from(KEYS[5 + 4 * i - 3])
    for _, lane in ipairs(lower) do take_from(lane[3], lane) end
  end
end

local skipped, revoked = {}, {}
if #fetched > 0 and rare_present and redis.call('EXISTS', KEYS[3]) == 1 then
  fetched = kept_after(fetched, function(index, payload)
    local jid = drop_if_finished_late(KEYS[3], reliable and in_progress_of(index) or '', KEYS[2], payload)
    if jid then skipped[#skipped + 1] = jid end
    return jid
  end)
end
if #fetched > 0 and rare_present and redis.call('EXISTS', KEYS[4]) == 1 then
  local now = clock_now()
  fetched = kept_after(fetched, function(index, payload)
    local jid = drop_if_revoked(KEYS[4], reliable and in_progress_of(index) or '', KEYS[2], payload, now)
    -- The worker's task_revoked needs the job (djwork/results/revoke_events.py).
    if jid then revoked[#revoked + 1] = payload end
    return jid
  end)
end
return {fetched, paused, broken, skipped, revoked}
