-- periodic_claim: decide one slot of a periodic entry and push its job, in one step (lua/periodic_lib.lua decides).
-- The fence of "exactly once per slot": the entry's watermark (the last slot
-- decided, durable in its state hash) is checked and advanced, and the job is
-- pushed, atomically, on Redis's clock. A replay, a second leader or a process
-- whose host clock is wrong can only get 'done' (decided before) or 'early'
-- (not due yet); a slot is never decided twice and never decided without its push.
-- Every key's type is read before the first write: a script stopped by
-- WRONGTYPE keeps what it wrote, and a watermark advanced without its push
-- would lose the run.
-- KEYS[1] = djwork:periodic:state:<id> HASH, KEYS[2] = djwork:periodic:history:<id> LIST,
-- KEYS[3] = queue:<name> LIST, KEYS[4] = queues SET, KEYS[5] = djwork:periodic-running:<id> STRING
-- ARGV[1] = 'init' (start watching: the watermark becomes now) | 'fire' | 'skip' | 'now' (run now: no slot)
-- ARGV[2] = the slot, simulated epoch ms
-- ARGV[3] = due slots before it that this claim skips, ARGV[4] = the oldest of them (ms; '0' if none)
-- ARGV[5] = why 'skip' skips the slot: 'missed' | 'paused' | 'middleware' (client middleware stopped its push)
-- ARGV[6] = the job's JSON object without enqueued_at ('' for init and skip), ARGV[7] = its jid,
-- ARGV[8] = the queue's name, ARGV[9] = running-lock TTL ms ('' = overlap allowed, KEYS[5] untouched)
-- ARGV[10..12] = clock origin, start, speed: simulated = start + (TIME - origin) * speed
-- ARGV[13] = history entries kept
-- Returns {status, watermark}. status: 'fired', 'skipped', 'paused', 'overlap' (the slot is decided),
-- 'done' (decided before), 'early' (not due on Redis's clock), 'initialized', 'busy' (run now refused:
-- the lock's holder is returned in place of the watermark).
--@include periodic_lib
redis.call('LLEN', KEYS[3])
return periodic_decide(KEYS[1], KEYS[2], KEYS[5], function(payload)
  redis.call('LPUSH', KEYS[3], payload)
  redis.pcall('SADD', KEYS[4], ARGV[8])
end)
