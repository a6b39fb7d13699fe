-- store_results: write the results of finished jobs whose acks will not ride on a fetch (the
-- shutdown requeue drops them; a job finished after the shutdown deadline). result_lib does the
-- write, so it is the ack's own: a REVOKED record stays, a waiting get() is woken.
-- KEYS[1] = djwork:revoked ZSET, KEYS[2] = djwork:result-waiters HASH (the result keys come in ARGV,
-- as in fetch.lua's acks)
-- ARGV = triples: jid, result HASH key, result spec.
-- Returns the number of triples.
--@include result_lib
local guard = result_guard(KEYS[1], KEYS[2])
for i = 1, #ARGV, 3 do
  result_store(guard, ARGV[i + 1], ARGV[i + 2], ARGV[i])
end
return #ARGV / 3
