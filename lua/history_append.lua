-- history_append: append one flush of execution records to the history stream, as batched entries,
-- then trim the oldest entries so the stream keeps about max runs.
-- One entry per chunk of runs, the runs' JSON stored as the worker sent it: no cjson, no string
-- formatting and no command per run here, which is what made history cost Redis ~5 µs of CPU per job.
-- KEYS[1] = djwork:history STREAM
-- ARGV[1] = runs to keep (HISTORY_MAX_LENGTH), ARGV[2] = the worker's identity,
-- then pairs: ARGV[2k+1] = runs in chunk k (integer), ARGV[2k+2] = the chunk's JSON array of runs,
--   each [jid, class, queue, status, started (float s), duration (float ms), error_class, error_message,
--   resumed (1 or 0)].
-- Entry fields: identity, count, through (runs the stream has had, this entry's included), runs.
-- Returns the number of runs appended.
local key, keep = KEYS[1], tonumber(ARGV[1])

local function through_of(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'through' then return tonumber(fields[i + 1]) end
  end
  return nil  -- a one-run-per-entry entry from an older djwork
end

-- The running total continues from the newest batched entry. An older worker may have written
-- one-run entries after it (a rolling deploy): look a little further back, past those small entries.
local total = 0
local newest = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
if newest[1] then
  local found = through_of(newest[1][2])
  local upper = newest[1][1]
  local looks = 0
  while not found and upper and looks < 4 do
    looks = looks + 1
    local rows = redis.call('XREVRANGE', key, '(' .. upper, '-', 'COUNT', 16)
    upper = nil
    for _, row in ipairs(rows) do
      found = through_of(row[2])
      if found then break end
    end
    if not found and #rows == 16 then upper = rows[16][1] end
  end
  total = found or 0
end

local appended = 0
for i = 3, #ARGV - 1, 2 do
  local count = tonumber(ARGV[i])
  total = total + count
  appended = appended + count
  redis.call('XADD', key, '*', 'identity', ARGV[2], 'count', ARGV[i], 'through', string.format('%d', total),
             'runs', ARGV[i + 1])
end

-- Trim from the oldest end: drop every entry whose removal still leaves at least `keep` runs after it.
-- Runs after an entry = total - its through; when its through is above total the running total restarted
-- after it (the stream was emptied, or only old-format entries were in reach above), and then at least
-- `total` runs came after it. Old-format entries count as through 0: they go once new entries hold `keep`.
-- Only about one chunk more than `keep` is ever kept, and never fewer than `keep`.
if total < keep then return appended end
local first_kept, dropped = nil, 0
local lower = '-'
-- A flush usually retires about as many entries as it added: read that many plus one first, since
-- every entry read is copied whole (up to CHUNK runs of JSON), then 16 at a time.
local batch = math.min(16, math.floor((#ARGV - 2) / 2) + 1)
while not first_kept do
  local rows = redis.call('XRANGE', key, lower, '+', 'COUNT', batch)
  for _, row in ipairs(rows) do
    local through = through_of(row[2]) or 0
    local after = through <= total and total - through or total
    if after < keep then
      first_kept = row[1]
      break
    end
    dropped = dropped + 1
  end
  if first_kept or #rows < batch then break end
  lower = '(' .. rows[batch][1]
  batch = 16
end
if first_kept and dropped > 0 then
  redis.call('XTRIM', key, 'MINID', first_kept)
end
return appended
