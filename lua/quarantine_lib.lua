-- quarantine_lib: the key guard's index trim, shared by one server's quarantine.lua and a cluster's
-- quarantine_index.lua. Entries past the TTL name copies that expired with it and are dropped; then at most
-- `keep` copies of each key are kept (the oldest beyond go), and the index holds at most `cap` copies.
-- Returns the copies trimmed (removed from the index, not deleted: one server deletes them in its step, a
-- cluster deletes each in its own slot).
-- A library: djwork/redis/scripts.py puts this text where a script has the line `--@include quarantine_lib`.
-- KEYS: none of its own (the index is passed in); ARGV: none.
local function quarantine_trim(index, heads, ms, ttl, keep, cap)
  redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. string.format('%.0f', ms - ttl * 1000))
  local trimmed = {}
  for _, head in ipairs(heads) do
    -- Copies of exactly this key: the rest of the name is <ms>:<token>, so the copies of "a:1:ff" never
    -- count as copies of "a".
    local copies = {}
    for _, member in ipairs(redis.call('ZRANGE', index, 0, -1)) do
      if string.sub(member, 1, #head) == head and string.match(string.sub(member, #head + 1), '^%d+:%x+$') then
        copies[#copies + 1] = member
      end
    end
    for i = 1, #copies - keep do
      redis.call('ZREM', index, copies[i])
      trimmed[#trimmed + 1] = copies[i]
    end
  end
  local extra = redis.call('ZCARD', index) - cap
  if extra > 0 then
    for _, member in ipairs(redis.call('ZRANGE', index, 0, extra - 1)) do
      trimmed[#trimmed + 1] = member
    end
    redis.call('ZREMRANGEBYRANK', index, 0, extra - 1)
  end
  return trimmed
end
