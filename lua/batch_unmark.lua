-- batch_unmark: the leader's sweep forgets batches with nothing pending (djwork/batches/cluster_accounting.py), each
-- only while its mark holds the score the sweep read: a job end that marked it again since may have left a
-- callback pending, and its mark must stay for the next sweep.
-- KEYS[1] = djwork:batch-sweep ZSET. ARGV = bid, score, bid, score... Returns the number removed.
local removed = 0
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
