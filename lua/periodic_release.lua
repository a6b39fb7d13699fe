-- periodic_release: free no-overlap entries' running locks, each only if its own run still holds it.
-- Compare-and-delete: a lock that lapsed and was taken by the entry's next run
-- must survive the late release of the run before it.
-- The same release (lua/locks_lib.lua) runs in every script that acks or buries a
-- job carrying a lock (docs/periodic.md, Running lock), so the release and the
-- job's own state change land in one step.
-- KEYS[i] = djwork:periodic-running:<entry id> STRING
-- ARGV[i] = the jid that holds KEYS[i]
-- Returns the number of locks released.
--@include locks_lib
local released = 0
for i = 1, #KEYS do
  released = released + lock_release(KEYS[i], ARGV[i])
end
return released
