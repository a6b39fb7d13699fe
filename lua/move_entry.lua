-- move_entry: move one member from a sorted set or list into another sorted set, atomically.
-- Used to bury what can't be run: a malformed payload or a poison pill to
-- `dead`, an unreadable scheduled entry to `dead`. Add before remove.
-- KEYS[1] = source key (ZSET or LIST), KEYS[2] = target ZSET, KEYS[3] = djwork:orphan-counts HASH,
-- KEYS[4] = djwork:dead-bytes STRING (only read when trimming)
-- ARGV[1] = "zset" | "list" (source type), ARGV[2] = member as stored in the source,
-- ARGV[3] = member to add to the target, ARGV[4] = score,
-- ARGV[5] = '0', or the byte cap of `dead` to trim the target as `dead` (dead_lib), ARGV[6] = cutoff score,
-- ARGV[7] = max size (entries), ARGV[8] = jid or '',
-- ARGV[9] (optional) = lock keys the job owns, "\n"-separated: released, owner-checked, as the move ends
-- the job (a kill from the dashboard; djwork/job_locks.py). Absent or '' keeps them. A b-<bid> line
-- is the job's batch, which counts it as dead (lua/ties_lib.lua).
-- Returns 1 if moved, 0 if the source member was gone.
--@include ties_lib
--@include dead_lib
if ARGV[1] == 'zset' then
  if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
end
dead_file(KEYS[2], KEYS[2], KEYS[4], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
if ARGV[1] == 'zset' then
  redis.call('ZREM', KEYS[1], ARGV[2])
else
  redis.call('LREM', KEYS[1], -1, ARGV[2])
end
if ARGV[8] ~= '' then
  redis.call('HDEL', KEYS[3], ARGV[8])
  ties_end(ARGV[9] or '', ARGV[8], 'died')  -- its locks, and its batch: buried, it died (ties_lib)
end
return 1
