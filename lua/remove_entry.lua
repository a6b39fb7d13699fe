-- remove_entry: delete one job from a queue LIST or a sorted set, and release the locks it owns, in one step.
-- The dashboard's and the API's Delete: a unique job's lock deleted in a second call
-- would outlive a delete whose connection broke in between, refusing every copy of
-- the job until its TTL. Owner-checked, as every release (djwork/job_locks.py): a
-- lock another jid holds now is left alone. Lock keys come from the payload, not
-- KEYS, as in fetch.lua: only the payload knows which locks the job owns.
-- KEYS[1] = the LIST or ZSET holding the job
-- ARGV[1] = "zset" | "list", ARGV[2] = the member exactly as stored, ARGV[3] = jid ('' = none),
-- ARGV[4] = lock keys the job owns, "\n"-separated ('' = none)
-- Returns 1 if removed (and its locks released), 0 if the member was gone.
--@include ties_lib
local removed
if ARGV[1] == 'zset' then
  removed = redis.call('ZREM', KEYS[1], ARGV[2])
else
  removed = redis.call('LREM', KEYS[1], 1, ARGV[2])
end
if removed == 0 then
  return 0
end
ties_end(ARGV[4], ARGV[3], 'died')  -- deleted, it will not run: its batch counts it as dead (ties_lib)
return 1
