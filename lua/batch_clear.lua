-- batch_clear: a cluster batch's pending fields done with (lua/batch_account.lua), each removed only while it
-- still holds the value that was acted on: a field written again since (a later outcome told to the parent)
-- stays for the next call. Repeats harmlessly.
-- KEYS[1] = b-<bid> HASH. ARGV = field, value, field, value... Returns the number removed.
local removed = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    removed = removed + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return removed
