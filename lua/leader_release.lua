-- leader_release: give up the leader lease on a clean stop, only if this process still holds it.
-- A GET then a DEL from the client would delete a follower's fresh lease when
-- ours lapsed between the two commands: compare and delete in one step.
-- KEYS[1] = dear-leader STRING
-- ARGV[1] = this process's identity
-- Returns 1 if the lease was ours and is gone, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
