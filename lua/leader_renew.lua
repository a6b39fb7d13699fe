-- leader_renew: extend the leader lease only while this process still holds it.
-- A plain EXPIRE would extend whatever the key holds: after our lease lapsed
-- (a long GC pause, a lost network) it would prolong a follower's fresh lease
-- in our name. Compare and extend in one step.
-- KEYS[1] = dear-leader STRING
-- ARGV[1] = this process's identity, ARGV[2] = lease in milliseconds
-- Returns 1 if the lease was ours and is extended, 0 if another process (or nobody) holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
