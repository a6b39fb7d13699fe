-- quarantine: move a key that holds the wrong type aside, so djwork can use its name again.
-- A STRING where a queue's LIST belongs failed every fetch and every push
-- with a WRONGTYPE that named no key; a STRING on `retry` left failing jobs
-- stuck in progress. Check and move are one step: a key fixed (or deleted)
-- meanwhile is never moved. Nothing is deleted: the copy keeps its content
-- for 30 days (EXPIRE), named <prefix><key>:<ms>:<random> with ms from Redis's
-- clock, and recorded in the index; at most `keep` copies of one key are
-- kept (the oldest beyond go), and the index holds at most `cap` copies.
-- The one script that derives key names: a copy's name must carry the time
-- of the move, and the copies it trims are the ones the index lists.
-- If the index itself holds the wrong type, it is moved aside first.
-- KEYS[1] = the key to check, KEYS[2] = the quarantine index ZSET (copy name -> ms of the move, to the µs)
-- ARGV[1] = expected type (as TYPE names it), ARGV[2] = copy name prefix, ARGV[3] = TTL seconds,
-- ARGV[4] = copies kept per key, ARGV[5] = index cap, ARGV[6], ARGV[7] = random hex tokens (key, index)
-- Returns {type found, copy name or false, index type found, index copy name or false}.
local key, index = KEYS[1], KEYS[2]
local prefix, ttl = ARGV[2], tonumber(ARGV[3])
local keep, cap = tonumber(ARGV[4]), tonumber(ARGV[5])
--@include clock_lib
--@include quarantine_lib
local seconds, micros = clock_read()
local ms = seconds * 1000 + math.floor(micros / 1000)
local stamp = string.format('%.0f', ms)
-- Scored to the microsecond: copies made within one millisecond still trim oldest first.
local score = seconds * 1000 + micros / 1000
local moved = {}

local function check(name, want, token)
  local kind = redis.call('TYPE', name)['ok']
  if kind == 'none' or kind == want then
    return kind, false
  end
  local copy = prefix .. name .. ':' .. stamp .. ':' .. token
  redis.call('RENAME', name, copy)
  redis.call('EXPIRE', copy, ttl)
  moved[#moved + 1] = {name, copy}
  return kind, copy
end

local index_type, index_copy = 'zset', false
if key ~= index then
  index_type, index_copy = check(index, 'zset', ARGV[7])
end
local found, copy = check(key, ARGV[1], ARGV[6])
if #moved == 0 then
  return {found, false, index_type, false}
end

for _, pair in ipairs(moved) do
  redis.call('ZADD', index, score, pair[2])
end
local heads = {}
for _, pair in ipairs(moved) do
  heads[#heads + 1] = prefix .. pair[1] .. ':'
end
for _, trimmed in ipairs(quarantine_trim(index, heads, ms, ttl, keep, cap)) do
  redis.call('DEL', trimmed)
end
return {found, copy, index_type, index_copy}
