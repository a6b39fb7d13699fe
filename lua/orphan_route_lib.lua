-- orphan_route_lib: where each job of a dead process's in-progress list goes. One source for
-- recover_orphans.lua (one server) and recover_list.lua (a cluster, the queue's slot), so the poison-pill
-- and isolation rules cannot drift apart. A library: djwork/redis/scripts.py puts this text where a script
-- has the line `--@include orphan_route_lib`. KEYS and ARGV: none of its own; the keys come from the caller's
-- KEYS. Returns nothing (orphan_route returns the number requeued and the poison list).
--@include job_lib

-- Every job running in a crashed process is counted, the culprit and its bystanders alike. A job recovered
-- more than max_orphanings times is a poison pill that kills whatever runs it: requeued, it would crash one
-- worker after another forever, so it stays on the list and is returned for the caller to bury in `dead`.
-- A job recovered isolate_after times or more goes to the queue's isolated list instead of the queue:
-- fetch.lua takes at most one of those per process at a time, so a further crash counts against exactly one
-- suspect and the bystanders stop climbing towards the poison-pill limit. Jobs are pushed before the list is
-- cleared, so none is ever only in the script's memory. `each(jid, job, count)`, when given, sees every job
-- after it is routed (nil jid: a payload that is not a job). `requeue(item)` pushes a job back onto its queue
-- (one server's puts a prioritised job back in its lane). Returns the number requeued and the poison list.
local function orphan_route(list, requeue, orphan_counts, isolated, max_orphanings, isolate_after, each)
  local items = redis.call('LRANGE', list, 0, -1)
  local poison = {}
  local requeued = 0
  for i = 1, #items do
    local jid, job = job_decode(items[i])
    local count = 0
    if jid then count = redis.call('HINCRBY', orphan_counts, jid, 1) end
    if count > max_orphanings then
      poison[#poison + 1] = items[i]
    elseif count >= isolate_after then
      redis.call('RPUSH', isolated, items[i])
      requeued = requeued + 1
    else
      requeue(items[i])
      requeued = requeued + 1
    end
    if each then each(jid, job, count) end
  end
  redis.call('DEL', list)
  for i = 1, #poison do redis.call('RPUSH', list, poison[i]) end
  return requeued, poison
end
