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
-- Entries past the TTL name copies that expired with it.
redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. string.format('%.0f', ms - ttl * 1000))
for _, pair in ipairs(moved) do
  -- Copies of exactly this key: the rest of the name is <ms>:<token>, so the
  -- copies of "a:1:ff" never count as copies of "a".
  local head = prefix .. pair[1] .. ':'
  local copies = {}
  for _, member in ipairs(redis.call('ZRANGE', index, 0, -1)) do
    if string.sub(member, 1, #head) == head and string.match(string.sub(member, #head + 1), '^%d+:%x+$') then
      copies[#copies + 1] = member
    end
  end
  for i = 1, #copies - keep do
    redis.call('DEL', copies[i])
    redis.call('ZREM', index, copies[i])
  end
end
local extra = redis.call('ZCARD', index) - cap
if extra > 0 then
  for _, member in ipairs(redis.call('ZRANGE', index, 0, extra - 1)) do
    redis.call('DEL', member)
  end
  redis.call('ZREMRANGEBYRANK', index, 0, extra - 1)
end
return {found, copy, index_type, index_copy}
