-- periodic_retake: (re)take no-overlap entries' running locks for runs that go on: a job that orphan
-- recovery or a shutdown pushed back, or that waits in `retry`.
-- Each lock is set to its jid with a fresh TTL when it is free or already held
-- by that jid; a lock another jid holds is left alone and that jid returned
-- (the entry's next run started meanwhile: the caller logs the overlap).
-- KEYS[i] = djwork:periodic-running:<entry id> STRING
-- ARGV[2i-1] = the jid of KEYS[i]'s run, ARGV[2i] = TTL in milliseconds
-- Returns, per key, 1 (held by its jid now) or the jid that holds it instead.
--@include locks_lib
local result = {}
for i = 1, #KEYS do
  local held = lock_retake(KEYS[i], ARGV[2 * i - 1], ARGV[2 * i])
  if type(held) == 'table' then return held end  -- a lock key of the wrong type: its error, to be named
  result[i] = held == true and 1 or held
end
return result
