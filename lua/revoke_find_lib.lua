-- revoke_find_lib: a revoke's flag and its bounded search for the job where it waits, written once for
-- revoke.lua (one server, one step) and a Redis Cluster's steps (revoke_mark.lua, revoke_remove.lua), so
-- the two cannot drift apart. A library: djwork/redis/scripts.py puts this text where a script has the line
-- `--@include revoke_find_lib`. KEYS and ARGV: none of its own; the keys come from the caller's KEYS.
-- Returns nothing.
--@include job_lib

-- Flag `jid` as revoked until now + ttl; flags past their time go, and the key expires ttl after the
-- last revoke. A worker fetching the job drops it, a running job sees the flag (djwork.revoked).
local function revoke_flag(revoked, jid, ttl, now)
  redis.call('ZADD', revoked, now + ttl, jid)
  redis.call('ZREMRANGEBYSCORE', revoked, '-inf', now)
  redis.call('EXPIRE', revoked, ttl)
end

-- The decoded job when `payload` is `jid`'s (a plain-text find first, then a decode to confirm), else nil.
local function revoke_match(payload, jid)
  if not string.find(payload, '"jid":"' .. jid .. '"', 1, true) then return nil end
  local found, job = job_decode(payload)
  if found == jid then return job end
  return nil
end

-- Remove `jid`'s entries from the sorted set `key` (ZSCAN MATCH on the jid's text), looking at about
-- `bound` entries at most; `removed(job, payload)` is called for each entry removed.
local function revoke_from_set(key, jid, bound, removed)
  local cursor, seen = '0', 0
  repeat
    local reply = redis.call('ZSCAN', key, cursor, 'MATCH', '*"jid":"' .. jid .. '"*', 'COUNT', 1000)
    cursor = reply[1]
    seen = seen + 1000
    for i = 1, #reply[2], 2 do
      local job = revoke_match(reply[2][i], jid)
      if job and redis.call('ZREM', key, reply[2][i]) == 1 then removed(job, reply[2][i]) end
    end
  until cursor == '0' or seen >= bound
end

-- The same for the LIST `key` (LRANGE in chunks of 1,000, at most `bound` entries looked at).
local function revoke_from_list(key, jid, bound, removed)
  local start = 0
  while start < bound do
    local items = redis.call('LRANGE', key, start, start + 999)
    for i = 1, #items do
      local job = revoke_match(items[i], jid)
      if job and redis.call('LREM', key, 1, items[i]) == 1 then removed(job, items[i]) end
    end
    if #items < 1000 then break end
    start = start + 1000
  end
end
