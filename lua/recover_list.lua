-- recover_list: recover_orphans.lua's move for a Redis Cluster, every key in the queue's slot.
-- The caller has already decided the owner is dead (lua/orphan_owner.lua removed its beat, on
-- Redis's clock) and unregisters the list afterwards: those keys live in other slots. Here the
-- dead process's in-progress list goes back to its queue, each job's recovery counted; a job
-- recovered `isolate_after` times or more goes to the isolated list instead, and a job recovered
-- more than `max_orphanings` times stays on the list and is returned, for the caller to file in
-- `dead` first and take off the list after (lua/file_entry.lua, then lua/drop_copy.lua): nothing
-- leaves a list before it is somewhere else. Jobs are pushed before the list is cleared.
-- A prioritised job goes back to its lane (docs/priority.md, lua/lane_lib.lua), in the queue's slot: its
-- lanes carry the queue's tag (`djwork:lane:{queue:<name>}|<n>`), registered after the push.
-- KEYS[1] = the in-progress LIST, KEYS[2] = queue:<name>, KEYS[3] = the queue's orphan-counts HASH,
-- KEYS[4] = the queue's isolated LIST, KEYS[5] = the queue's lanes SET
-- ARGV[1] = max orphanings, ARGV[2] = isolate_after (recoveries), ARGV[3] = the name its lane keys are built
-- from (`{queue:<name>}`)
-- Returns {requeued count, poison payload...}.
--@include orphan_route_lib
--@include lane_lib
local function requeue(item) lane_push('RPUSH', KEYS[2], KEYS[5], ARGV[3], item) end
local requeued, poison = orphan_route(KEYS[1], requeue, KEYS[3], KEYS[4], tonumber(ARGV[1]), tonumber(ARGV[2]))
local result = {requeued}
for i = 1, #poison do result[#result + 1] = poison[i] end
return result
