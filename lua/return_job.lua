-- return_job: give back a job a queue waiter took but cannot run (no free slot, queue paused, quieting).
-- The job goes back to the pop end (RPUSH), where it was taken from, so it
-- is next in line. Removed and pushed in one step, and only if still on the
-- in-progress list, so a replay after a lost reply pushes nothing twice.
-- KEYS[1] = the in-progress LIST, KEYS[2] = queue:<name>
-- ARGV[1] = raw payload
-- Returns 1 if returned, 0 if it was no longer on the in-progress list.
if redis.call('LREM', KEYS[1], 1, ARGV[1]) > 0 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  return 1
end
return 0
