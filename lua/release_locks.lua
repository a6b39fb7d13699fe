-- release_locks: delete the job-bound locks (djwork/job_locks.py) that `jid` still owns.
-- Compare-and-delete in one step (lua/locks_lib.lua): a lock that expired and was taken by
-- another jid since is left alone (a GET-then-DEL from the client could delete it).
-- Lock keys come from the job's payload, not KEYS: which locks a job owns is
-- only known from the payload (the caller filters them to djwork's prefixes, as the release does).
-- A b-<bid> line is a cleared job's batch: it will not run, so its batch counts it as died (lua/ties_lib.lua).
-- ARGV[1] = owner jid, ARGV[2] = lock keys separated by "\n"
-- Returns the number released.
--@include ties_lib
return ties_end(ARGV[2], ARGV[1], 'died')
