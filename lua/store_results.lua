-- store_results: write the results of finished jobs whose acks will not ride on a fetch (the
-- shutdown requeue drops them; a job finished after the shutdown deadline). result_lib does the
-- write, so it is the ack's own: a REVOKED record stays, a waiting get() is woken.
-- KEYS: none (the keys come in ARGV, as in fetch.lua's acks).
-- ARGV = triples: result HASH key, result-notify LIST key, result spec.
-- Returns the number of triples.
--@include result_lib
for i = 1, #ARGV, 3 do
  result_store(ARGV[i], ARGV[i + 1], ARGV[i + 2])
end
return #ARGV / 3
