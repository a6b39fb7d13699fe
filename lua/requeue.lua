-- requeue: on shutdown, put a process's unfinished jobs back on their queue in one atomic step.
-- Jobs that finished but whose ack is still buffered are dropped first, in
-- the same step: the process knows they ran even though Redis doesn't yet,
-- and requeued they would run a second time.
-- Requeued jobs go to the pop end (RPUSH), oldest nearest it, so they run
-- next (Sidekiq's bulk_requeue). The list stays in the in-progress registry:
-- a queue waiter's take that lands after this step must still be found by
-- orphan recovery; the heartbeat's clean stop unregisters the lists left empty.
-- A job already recovered from dead processes `isolate_after` times goes back
-- to the queue's isolated list, not the queue: a clean stop must not undo its
-- isolation (see recover_orphans.lua). Only read here, at shutdown, so
-- decoding each job costs nothing per fetch.
-- A prioritised job goes back to its lane (docs/priority.md, lua/lane_lib.lua).
-- KEYS[1] = in-progress LIST, KEYS[2] = queue:<name>, KEYS[3] = djwork:orphan-counts HASH,
-- KEYS[4] = the queue's isolated LIST, KEYS[5] = the queue's lanes SET
-- ARGV[1] = isolate_after (recoveries), ARGV[2] = the queue's name,
-- ARGV[3..] = raw payloads whose ack is pending (removed, not requeued)
-- Returns the number of jobs requeued.
--@include job_lib
--@include lane_lib
local isolate_after = tonumber(ARGV[1])
for i = 3, #ARGV do
  redis.call('LREM', KEYS[1], -1, ARGV[i])
end
local items = redis.call('LRANGE', KEYS[1], 0, -1)
for i = 1, #items do
  local isolated = false
  local jid = job_decode(items[i])
  if jid then
    local count = tonumber(redis.call('HGET', KEYS[3], jid) or '0')
    isolated = count >= isolate_after
  end
  if isolated then
    redis.call('RPUSH', KEYS[4], items[i])
  else
    lane_push('RPUSH', KEYS[2], KEYS[5], ARGV[2], items[i])
  end
end
redis.call('DEL', KEYS[1])
return #items
