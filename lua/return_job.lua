-- return_job: give back a job a queue waiter took but cannot run (no free slot, queue paused, quieting).
-- The job goes back to the pop end (RPUSH), where it was taken from, so it
-- is next in line. Removed and pushed in one step, and only if still on the
-- in-progress list, so a replay after a lost reply pushes nothing twice.
-- A prioritised job goes back to its lane instead (docs/priority.md) when the caller gives the queue's
-- lanes SET and name; a job given back to the isolated list stays there, lane or not.
-- KEYS[1] = the in-progress LIST, KEYS[2] = queue:<name> (or its isolated LIST), KEYS[3] = its lanes SET (optional)
-- ARGV[1] = raw payload, ARGV[2] = the queue's name (with KEYS[3])
-- Returns 1 if returned, 0 if it was no longer on the in-progress list.
--@include lane_lib
if redis.call('LREM', KEYS[1], 1, ARGV[1]) > 0 then
  if KEYS[3] then
    lane_push('RPUSH', KEYS[2], KEYS[3], ARGV[2], ARGV[1])
  else
    redis.call('RPUSH', KEYS[2], ARGV[1])
  end
  return 1
end
return 0
