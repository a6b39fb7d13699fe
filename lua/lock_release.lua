-- lock_release: one job-bound lock (djwork/job_locks.py) deleted if `jid` still owns it (Redis Cluster).
-- On one server a job's locks are released inside the step that ends it (lua/ties_lib.lua); on a cluster
-- each lock is a slot of its own, so each gets this call after that step, owner-checked as everywhere
-- (lua/locks_lib.lua): a lock that lapsed and was taken by another jid since is left alone, and a repeat
-- releases nothing more.
-- KEYS[1] = the lock key, ARGV[1] = the owner jid
-- Returns 1 when released, else 0.
--@include locks_lib
return lock_release(KEYS[1], ARGV[1])
