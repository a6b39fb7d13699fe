-- push_once: a job pushed onto its queue at most once per move, in the queue's slot (Redis Cluster).
-- The first half of a cluster's two-step move (scheduled/retry -> queue): the move pushes, then
-- removes the source entry in another slot; a crash between leaves the entry where the next pass
-- finds it and moves it again, and this push is then a no-op, since the move is already in the
-- queue's push dedupe (docs/cluster.md, Keys). A move is named by its source entry (the caller's
-- digest of the set and the member), not by the jid alone: a job retried again carries the same jid
-- in a new entry (its retry_count changed), and that move must push. The dedupe forgets a move after
-- `horizon` seconds, trimmed here on each push, so it holds about an hour of moves.
-- A prioritised job's list is its lane (`djwork:lane:{queue:<name>}|<n>`, docs/priority.md): the caller gives
-- the lane and the queue's lanes SET, and the lane is registered after the push, as every push to a lane is.
-- KEYS[1] = djwork:pushed:{queue:<name>} ZSET, KEYS[2] = queue:<name> LIST or its lane (one slot by the tag),
-- KEYS[3] = the queue's lanes SET (optional, with ARGV[5])
-- ARGV[1] = the move's name, ARGV[2] = payload, ARGV[3] = now (epoch seconds), ARGV[4] = horizon (seconds),
-- ARGV[5] = the lane KEYS[2] is (optional; '' or absent: the queue's own list)
-- Returns 1 when pushed, 0 when this move had pushed already.
if redis.call('ZADD', KEYS[1], 'NX', ARGV[3], ARGV[1]) == 0 then
  return 0
end
-- Pushed before the trim: a refused push (the queue of the wrong type) must not leave the move marked.
local pushed = redis.pcall('LPUSH', KEYS[2], ARGV[2])
if type(pushed) == 'table' and pushed['err'] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return pushed
end
if KEYS[3] and ARGV[5] and ARGV[5] ~= '' then redis.call('SADD', KEYS[3], ARGV[5]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[3]) - tonumber(ARGV[4]))
return 1
