-- release_locks: delete the job-bound locks (djwork/job_locks.py) that `jid` still owns.
-- Compare-and-delete in one step: a lock that expired and was taken by another
-- jid since is left alone (a GET-then-DEL from the client could delete it).
-- Lock keys come from the job's payload, not KEYS: which locks a job owns is
-- only known from the payload (the caller filters them to djwork's prefixes).
-- ARGV[1] = owner jid, ARGV[2] = lock keys separated by "\n"
-- Returns the number released.
--@include batch_lib
local released = 0
for key in string.gmatch(ARGV[2], '[^\n]+') do
  -- pcall: a lock key of the wrong type must not fail the release of the others.
  if string.sub(key, 1, 2) == 'b-' then
    ties_end(key, ARGV[1], 'dead')  -- a cleared job's batch: it will not run (lua/batch_lib.lua)
  elseif redis.pcall('GET', key) == ARGV[1] then
    redis.call('DEL', key)
    released = released + 1
  end
end
return released
