-- recover_orphans: requeue the in-progress list of a process that stopped beating.
-- Decided on Redis's clock (TIME), not any host's, so clock skew between
-- hosts can't make a live process look dead. A job recovered more than
-- max_orphanings times is a poison pill that kills whatever runs it
-- (docs/wire.md, djwork's own keys): requeued, it would crash one worker
-- after another forever. It is left on the list and returned, for the
-- caller to bury in `dead` with an error. Requeued jobs are pushed before
-- the list is cleared.
-- Where each job goes (queue, isolated list, or left as a pill) is lua/orphan_route_lib.lua's rule,
-- shared with the cluster's recover_list.lua.
-- KEYS[1] = the in-progress LIST, KEYS[2] = queue:<name>, KEYS[3] = djwork:beats ZSET,
-- KEYS[4] = djwork:orphan-counts HASH, KEYS[5] = djwork:inprogress registry SET,
-- KEYS[6] = the queue's isolated LIST, KEYS[7] = the queue's lanes SET
-- ARGV[1] = owner identity, ARGV[2] = orphan threshold seconds, ARGV[3] = max orphanings,
-- ARGV[4] = isolate_after (recoveries), ARGV[5] = the queue's name
-- A prioritised job goes back to its lane (docs/priority.md, lua/lane_lib.lua).
-- Returns {0} if the owner is alive, else {1, requeued count, poison payload...}.
--@include clock_lib
--@include job_lib
--@include orphan_route_lib
--@include locks_lib
--@include lane_lib
--@keys PERIODIC_LOCK_PREFIX
local now = clock_now()
local beat = redis.call('ZSCORE', KEYS[3], ARGV[1])
if beat and now - tonumber(beat) < tonumber(ARGV[2]) then
  return {0}
end
-- The owner is dead: drop its stamp too, or every crashed process would stay
-- in the beats ZSET forever (a clean stop removes its own).
redis.call('ZREM', KEYS[3], ARGV[1])
local max_orphanings = tonumber(ARGV[3])
-- A no-overlap periodic run keeps its running lock while it waits to run again: retaken in
-- this step with a fresh TTL (unless another run holds it now), so its entry neither fires
-- beside it nor stays wedged (docs/periodic.md).
local function retake_periodic_lock(jid, job, count)
  local periodic = jid and job['djwork_periodic']
  if count <= max_orphanings and type(periodic) == 'table' and lock_allowed(periodic['lock'])
      and string.sub(periodic['lock'], 1, #keys.PERIODIC_LOCK_PREFIX) == keys.PERIODIC_LOCK_PREFIX then
    lock_retake(periodic['lock'], jid, math.floor((tonumber(periodic['lock_ttl']) or 86400) * 1000))
  end
end
local function requeue(item) lane_push('RPUSH', KEYS[2], KEYS[7], ARGV[5], item) end
local requeued, poison = orphan_route(KEYS[1], requeue, KEYS[4], KEYS[6], max_orphanings, tonumber(ARGV[4]),
  retake_periodic_lock)
if #poison == 0 then
  redis.call('SREM', KEYS[5], KEYS[1])
end
local result = {1, requeued}
for i = 1, #poison do
  result[#result + 1] = poison[i]
end
return result
