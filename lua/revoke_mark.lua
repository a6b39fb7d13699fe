-- revoke_mark: the first step of a revoke on a Redis Cluster: the jid flagged in djwork:revoked (its own slot).
-- From here on a worker that fetches or takes the job drops it (djwork/worker/cluster/revoked.py) and a
-- running job sees the flag. The removals (lua/revoke_remove.lua) and the REVOKED record
-- (lua/revoke_result.lua) follow in their own slots: a crash after this step leaves the job waiting, to be
-- dropped when it is fetched. Repeating it only moves the flag's end later.
-- KEYS[1] = djwork:revoked ZSET
-- ARGV[1] = jid, ARGV[2] = ttl seconds
-- Returns 1.
--@include clock_lib
--@include revoke_find_lib
revoke_flag(KEYS[1], ARGV[1], tonumber(ARGV[2]), clock_now())
return 1
