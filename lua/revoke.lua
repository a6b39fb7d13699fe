-- revoke: stop a job (docs/celery.md, Revoke), in one step.
-- 1. Flag it: ZADD djwork:revoked jid -> until (now + ttl); drop flags past their time; the key itself
--    expires ttl after the last revoke. A worker fetching it drops it (fetch.lua, drop_revoked.lua),
--    fail.lua does not file it for a retry, a running job sees the flag (djwork.revoked).
-- 2. Remove it where it waits: `schedule`, `retry` and the queue LISTs given (lua/revoke_find_lib.lua's
--    search: a plain-text find, a decode to confirm).
--    Bounded: at most ARGV[4] entries are looked at per set or list; a job beyond that is still
--    stopped by the flag when it is fetched, within the flag's ttl.
-- 3. A removed job ends as a dead one does: its locks are released and its batch counts it as died
--    (lua/ties_lib.lua). Its orphan count, if any, is cleared.
-- 4. Record REVOKED in its result HASH (unless it already finished: SUCCESS and FAILURE stay).
-- KEYS[1] = djwork:revoked ZSET, KEYS[2] = result HASH, KEYS[3] = schedule ZSET, KEYS[4] = retry ZSET,
-- KEYS[5] = djwork:orphan-counts HASH, KEYS[6] = djwork:result-waiters HASH, KEYS[7..] = queue LISTs
-- ARGV[1] = jid, ARGV[2] = ttl seconds, ARGV[3] = result spec (REVOKED), ARGV[4] = scan bound per key
-- Returns key, payload pairs: where it was removed from and the payload removed (empty: not found waiting),
-- for the caller's task_revoked signal (djwork/results/revoke_events.py).
--@include revoke_find_lib
--@include ties_lib
--@include result_lib
local jid, ttl, bound = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local now = clock_now()
revoke_flag(KEYS[1], jid, ttl, now)

local removed = {}
local function ended_in(key)
  return function(job, payload)
    removed[#removed + 1] = key
    removed[#removed + 1] = payload
    ties_end(ties_of_job(job), jid, 'died')
  end
end

for k = 3, 4 do revoke_from_set(KEYS[k], jid, bound, ended_in(KEYS[k])) end
for k = 7, #KEYS do revoke_from_list(KEYS[k], jid, bound, ended_in(KEYS[k])) end
if #removed > 0 then redis.call('HDEL', KEYS[5], jid) end

local state = redis.call('HGET', KEYS[2], 'state')
if state ~= 'SUCCESS' and state ~= 'FAILURE' then
  local guard = result_guard(KEYS[1], KEYS[6])
  guard.revoked = false  -- the flag just set is this revoke's own: REVOKED is what it writes
  result_store(guard, KEYS[2], ARGV[3], jid)
end
return removed
