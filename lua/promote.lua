-- promote: move one due job from `schedule` or `retry` onto its queue, atomically.
-- The caller read the entry and built the payload to push (enqueued_at
-- restamped, "at" removed) in Python, so large integers in args are never
-- re-encoded by cjson. Present? Push, then remove — never remove first: a
-- script stopped by an error keeps the writes made before it, so a remove
-- followed by a failing push (a queue key of the wrong type) would lose the
-- job (docs/wire.md, Scheduled/retry/dead sets). Absent? Another process
-- promoted it first; do nothing, which is also what makes a replay of this
-- call harmless.
-- KEYS[1] = the ZSET, KEYS[2] = queue:<name>, KEYS[3] = queues SET
-- ARGV[1] = the member as stored, ARGV[2] = payload to push, ARGV[3] = queue name
-- Returns 1 if promoted, 0 if the member was gone.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[1], ARGV[1])
pcall(redis.call, 'SADD', KEYS[3], ARGV[3])
return 1
