-- unregister_if_empty: drop an in-progress list from the registry once nothing is left on it.
-- Checked and removed in one step so a list refilled in between stays registered.
-- KEYS[1] = the in-progress LIST, KEYS[2] = djwork:inprogress registry SET
-- ARGV = none
-- Returns 1 if unregistered, 0 otherwise.
if redis.call('LLEN', KEYS[1]) == 0 then
  return redis.call('SREM', KEYS[2], KEYS[1])
end
return 0
