-- quarantine_index: the second step of the key guard's move on a Redis Cluster (docs/cluster.md,
-- quarantine.lua): the copy lua/quarantine_move.lua made, recorded in the index (a slot of its own), and
-- the index trimmed as one server's lua/quarantine.lua trims it. The copies trimmed are in other slots, so
-- they are returned for the caller to delete, each in its slot (a crash first leaves them unindexed, to
-- expire with their TTL). If the index itself holds the wrong type, it is moved aside first, to a copy in its
-- own slot (its name wrapped in braces). Repeating it adds the same member with the same score.
-- KEYS[1] = the quarantine index ZSET (copy name -> ms of the move, to the µs)
-- ARGV[1] = the copy, ARGV[2] = its score, ARGV[3] = the head of the names of copies of the same key,
-- ARGV[4] = TTL seconds, ARGV[5] = copies kept per key, ARGV[6] = index cap,
-- ARGV[7] = the head of the index's own copy, ARGV[8] = random hex token
-- Returns {index type found, index copy name or false, copies to delete...}.
--@include clock_lib
--@include quarantine_lib
local index, copy, score, head = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local ttl, keep, cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local index_type, index_copy = redis.call('TYPE', index)['ok'], false
local seconds, micros = clock_read()
local ms = seconds * 1000 + math.floor(micros / 1000)
if index_type ~= 'none' and index_type ~= 'zset' then
  index_copy = ARGV[7] .. string.format('%.0f', ms) .. ':' .. ARGV[8]
  redis.call('RENAME', index, index_copy)
  redis.call('EXPIRE', index_copy, ttl)
  redis.call('ZADD', index, seconds * 1000 + micros / 1000, index_copy)
end
redis.call('ZADD', index, score, copy)
local reply = {index_type, index_copy}
for _, member in ipairs(quarantine_trim(index, {head}, ms, ttl, keep, cap)) do
  reply[#reply + 1] = member
end
return reply
