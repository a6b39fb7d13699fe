-- quarantine_move: the first step of the key guard's move on a Redis Cluster (docs/cluster.md, quarantine.lua):
-- the key checked and, when it holds the wrong type, renamed aside in its own slot, kept 30 days. One server's
-- lua/quarantine.lua also indexes the copy in the same step; on a cluster the index is a slot of its own
-- (lua/quarantine_index.lua, the second step), so a crash between leaves the copy unindexed, to expire.
-- Check and move are one step: a key fixed (or deleted) meanwhile is never moved.
-- The copy is <head><ms>:<token>, ms from Redis's clock as one server's copies are named. The caller's head
-- keeps the copy in the key's slot (the key's own hash tag, or the key wrapped in braces); a key no head can
-- keep there is asked for with head '': then nothing moves and its DUMP is returned, for the caller to
-- RESTORE under a copy in another slot and delete the key with lua/quarantine_drop.lua.
-- KEYS[1] = the key to check
-- ARGV[1] = expected type (as TYPE names it), ARGV[2] = the copy's head or '', ARGV[3] = TTL seconds,
-- ARGV[4] = random hex token
-- Returns {type found, copy name or false, ms of the move to the µs (a string), the key's DUMP or false,
-- the ms of the move as a copy's name carries it}.
--@include clock_lib
local key, head, ttl = KEYS[1], ARGV[2], tonumber(ARGV[3])
local kind = redis.call('TYPE', key)['ok']
if kind == 'none' or kind == ARGV[1] then
  return {kind, false, false, false, false}
end
local seconds, micros = clock_read()
local stamp = string.format('%.0f', seconds * 1000 + math.floor(micros / 1000))
-- Scored to the microsecond, as one server's index: copies made within one millisecond still trim oldest first.
local score = string.format('%.3f', seconds * 1000 + micros / 1000)
if head == '' then
  return {kind, false, score, redis.call('DUMP', key), stamp}
end
local copy = head .. stamp .. ':' .. ARGV[4]
redis.call('RENAME', key, copy)
redis.call('EXPIRE', copy, ttl)
return {kind, copy, score, false, stamp}
