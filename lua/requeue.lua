-- requeue: on shutdown, put a process's unfinished jobs back on their queue in one atomic step.
-- Jobs that finished but whose ack is still buffered are dropped first, in
-- the same step: the process knows they ran even though Redis doesn't yet,
-- and requeued they would run a second time.
-- Requeued jobs go to the pop end (RPUSH), oldest nearest it, so they run
-- next (Sidekiq's bulk_requeue). The list stays in the in-progress registry:
-- a queue waiter's take that lands after this step must still be found by
-- orphan recovery; the heartbeat's clean stop unregisters the lists left empty.
-- KEYS[1] = in-progress LIST, KEYS[2] = queue:<name>
-- ARGV = raw payloads whose ack is pending (removed, not requeued)
-- Returns the number of jobs requeued.
for i = 1, #ARGV do
  redis.call('LREM', KEYS[1], -1, ARGV[i])
end
local items = redis.call('LRANGE', KEYS[1], 0, -1)
for i = 1, #items do
  redis.call('RPUSH', KEYS[2], items[i])
end
redis.call('DEL', KEYS[1])
return #items
