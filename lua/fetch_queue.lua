-- fetch_queue: fetch.lua's step for ONE queue, every key in the queue's slot (Redis Cluster).
-- A cluster runs one call per queue, the calls for one node pipelined (djwork/worker/cluster/fetch.py):
-- a script may touch one slot only, and every key here carries the `{queue:<name>}` tag. What fetch.lua
-- reads in other slots is read apart: `paused` before the calls, by the caller; revoke, results, locks
-- and batches are refused on a cluster (docs/cluster.md), so no ack carries them.
-- Acks first (LREM from this process's in-progress list, the orphan count retired when the queue has
-- any), then up to `limit` jobs: at most `isolated` from the isolated list, then the oldest of the
-- queue, moved onto the in-progress list in three commands (reliable) or popped (basic). A copy
-- marked finished-late (lua/settle_late.lua) is dropped rather than run twice.
-- The queue's priority lanes (docs/priority.md) carry its tag too (`djwork:lane:{queue:<name>}|<n>`), so
-- they are taken here as fetch.lua takes them: the lanes above the queue's own list (highest first), the
-- list, the lanes below; only the lanes its lanes SET names, read only while that SET exists (one more key
-- in the EXISTS below). A lane found empty is unregistered (a push registers it again after pushing).
-- Commands on the queue's keys run under pcall: a key of the wrong type fails this queue alone,
-- reported back for the key guard, as in fetch.lua.
-- KEYS[1] = queue:<name>, KEYS[2] = its in-progress LIST, KEYS[3] = its isolated LIST,
-- KEYS[4] = its orphan-counts HASH, KEYS[5] = its finished-late HASH, KEYS[6] = its lanes SET
-- ARGV[1] = limit, ARGV[2] = "reliable" | "basic", ARGV[3] = isolated jobs that may be taken,
-- ARGV[4] = the name its lane keys are built from (`{queue:<name>}`), ARGV[5..] = the raw payloads of the acks
-- Returns {{taken payload...}, isolated taken (0 or 1), {broken key, error...}, {skipped jid...}};
-- an isolated job comes first when one was taken.
--@include job_lib
--@include lane_lib
local limit = tonumber(ARGV[1])
local reliable = ARGV[2] == 'reliable'
local isolated_allowed = tonumber(ARGV[3])
local broken = {}

local function failed(reply, key)
  if type(reply) == 'table' and reply['err'] then
    broken[#broken + 1] = key
    broken[#broken + 1] = reply['err']
    return true
  end
  return false
end

-- One EXISTS over the keys that are nearly always absent: while it answers 0 they cost nothing more.
local rare_present = redis.pcall('EXISTS', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
rare_present = type(rare_present) ~= 'number' or rare_present > 0
local orphans = rare_present and redis.pcall('EXISTS', KEYS[4]) ~= 0

for position = 5, #ARGV do
  local raw = ARGV[position]
  if reliable then failed(redis.pcall('LREM', KEYS[2], '-1', raw), KEYS[2]) end
  if orphans then
    local jid = job_decode(raw)
    if jid then failed(redis.pcall('HDEL', KEYS[4], jid), KEYS[4]) end
  end
end

local taken, isolated_taken = {}, 0
if reliable and isolated_allowed > 0 and limit > 0 and rare_present then
  local payload = redis.pcall('LMOVE', KEYS[3], KEYS[2], 'RIGHT', 'LEFT')
  if not failed(payload, KEYS[3]) and payload then
    taken[1] = payload
    isolated_taken = 1
  end
end
-- Up to `want` jobs of `source` (the queue's own list, or one of its lanes), oldest first.
local function take_from(source, lane)
  local want = limit - #taken
  if want <= 0 then return end
  local count = 0
  if not reliable then
    local batch = redis.pcall('RPOP', source, want)
    if not failed(batch, source) and batch then
      for _, payload in ipairs(batch) do taken[#taken + 1] = payload end
      count = #batch
    end
  else
    local batch = redis.pcall('LRANGE', source, -want, -1)
    if not failed(batch, source) and #batch > 0 then
      local oldest_first = {}
      for j = #batch, 1, -1 do oldest_first[#oldest_first + 1] = batch[j] end
      -- Pushed before the cut: a refused push (a key of the wrong type) loses nothing.
      if not failed(redis.pcall('LPUSH', KEYS[2], unpack(oldest_first)), KEYS[2]) then
        redis.call('LTRIM', source, 0, -(#batch + 1))
        for _, payload in ipairs(oldest_first) do taken[#taken + 1] = payload end
        count = #batch
      end
    end
  end
  -- Fewer than asked for: the lane may be empty now. LLEN says so for sure (a refused move took nothing
  -- and left the jobs there, which must stay registered).
  if lane and count < want and redis.pcall('LLEN', source) == 0 then redis.pcall('SREM', KEYS[6], lane[2]) end
end

local upper, lower = {}, {}
if rare_present and limit > #taken then
  local error
  upper, lower, error = lanes_registered(KEYS[6], ARGV[4])
  if failed(error, KEYS[6]) then upper, lower = {}, {} end
end
for _, lane in ipairs(upper) do take_from(lane[3], lane) end
take_from(KEYS[1])
for _, lane in ipairs(lower) do take_from(lane[3], lane) end

local skipped = {}
if #taken > 0 and rare_present and redis.call('EXISTS', KEYS[5]) == 1 then
  local kept = {}
  for index, payload in ipairs(taken) do
    local jid = job_decode(payload)
    if jid and redis.call('HDEL', KEYS[5], jid) == 1 then
      if reliable then redis.call('LREM', KEYS[2], -1, payload) end
      redis.pcall('HDEL', KEYS[4], jid)
      skipped[#skipped + 1] = jid
      if index == 1 then isolated_taken = 0 end
    else
      kept[#kept + 1] = payload
    end
  end
  taken = kept
end
return {taken, isolated_taken, broken, skipped}
