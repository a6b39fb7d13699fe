-- periodic_retake: (re)take no-overlap entries' running locks for runs that go on: a job that orphan
-- recovery or a shutdown pushed back, or that waits in `retry`.
-- Each lock is set to its jid with a fresh TTL when it is free or already held
-- by that jid; a lock another jid holds is left alone and that jid returned
-- (the entry's next run started meanwhile: the caller logs the overlap).
-- KEYS[i] = djwork:periodic-running:<entry id> STRING
-- ARGV[2i-1] = the jid of KEYS[i]'s run, ARGV[2i] = TTL in milliseconds
-- Returns, per key, 1 (held by its jid now) or the jid that holds it instead.
local result = {}
for i = 1, #KEYS do
  local jid = ARGV[2 * i - 1]
  local holder = redis.call('GET', KEYS[i])
  if not holder or holder == jid then
    redis.call('SET', KEYS[i], jid, 'PX', ARGV[2 * i])
    result[i] = 1
  else
    result[i] = holder
  end
end
return result
