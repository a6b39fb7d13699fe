-- release_if_owner: delete a lock key only if it still holds our token.
-- GET-then-DEL from the client is not this: the key can lapse between the
-- two commands and a new owner take it, and the bare DEL then drops *their*
-- lock (seed 000/001, wurk leader.rb). Compare and delete in one step.
-- KEYS[1] = the lock key (dear-leader, unique:<digest>, ...)
-- ARGV[1] = the token that must still be stored there
-- Returns 1 when the key was deleted, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
