-- periodic_release: free no-overlap entries' running locks, each only if its own run still holds it.
-- Compare-and-delete: a lock that lapsed and was taken by the entry's next run
-- must survive the late release of the run before it.
-- The same comparison, inlined, belongs in every script that acks or buries a
-- job carrying a lock (docs/periodic.md, Running lock), so the release and the
-- job's own state change land in one step.
-- KEYS[i] = djwork:periodic-running:<entry id> STRING
-- ARGV[i] = the jid that holds KEYS[i]
-- Returns the number of locks released.
local released = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i] then
    redis.call('DEL', KEYS[i])
    released = released + 1
  end
end
return released
