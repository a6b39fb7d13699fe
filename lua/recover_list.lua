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
--@include orphan_route_lib
local function requeue(item) redis.call('RPUSH', KEYS[2], item) end
local requeued, poison = orphan_route(KEYS[1], requeue, KEYS[3], KEYS[4], tonumber(ARGV[1]), tonumber(ARGV[2]))
local result = {requeued}
for i = 1, #poison do result[#result + 1] = poison[i] end
return result
