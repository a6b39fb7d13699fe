-- recover_list: recover_orphans.lua's move for a Redis Cluster, every key in the queue's slot.
-- The caller has already decided the owner is dead (lua/orphan_owner.lua removed its beat, on
-- Redis's clock) and unregisters the list afterwards: those keys live in other slots. Here the
-- dead process's in-progress list goes back to its queue, each job's recovery counted; a job
-- recovered `isolate_after` times or more goes to the isolated list instead, and a job recovered
-- more than `max_orphanings` times stays on the list and is returned, for the caller to file in
-- `dead` first and take off the list after (lua/file_entry.lua, then lua/drop_copy.lua): nothing
-- leaves a list before it is somewhere else. Jobs are pushed before the list is cleared.
-- KEYS[1] = the in-progress LIST, KEYS[2] = queue:<name>, KEYS[3] = the queue's orphan-counts HASH,
-- KEYS[4] = the queue's isolated LIST
-- ARGV[1] = max orphanings, ARGV[2] = isolate_after (recoveries)
-- Returns {requeued count, poison payload...}.
--@include job_lib
local max_orphanings = tonumber(ARGV[1])
local isolate_after = tonumber(ARGV[2])
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local poison = {}
local requeued = 0
for i = 1, #items do
  local jid = job_decode(items[i])
  local count = 0
  if jid then count = redis.call('HINCRBY', KEYS[3], jid, 1) end
  if count > max_orphanings then
    poison[#poison + 1] = items[i]
  elseif count >= isolate_after then
    redis.call('RPUSH', KEYS[4], items[i])
    requeued = requeued + 1
  else
    redis.call('RPUSH', KEYS[2], items[i])
    requeued = requeued + 1
  end
end
redis.call('DEL', KEYS[1])
for i = 1, #poison do redis.call('RPUSH', KEYS[1], poison[i]) end
local result = {requeued}
for i = 1, #poison do result[#result + 1] = poison[i] end
return result
