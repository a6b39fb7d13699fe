-- fail: file a failed job in `retry` or `dead` and drop it from the in-progress list, atomically.
-- Add before remove: a script stopped by an error keeps the writes made
-- before it, so a remove followed by a failing add (a key of the wrong
-- type) would lose the job (docs/wire.md, Scheduled/retry/dead sets).
-- A job revoked while it ran (KEYS[5], docs/celery.md) is not filed in `retry`: it ends here, as
-- a dead one does (locks released, its batch told), and its record stays REVOKED.
-- KEYS[1] = in-progress LIST (or the queue itself in basic mode: nothing is removed then),
-- KEYS[2] = target ZSET (retry or dead), KEYS[3] = dead ZSET, KEYS[4] = djwork:orphan-counts HASH,
-- KEYS[5] = djwork:revoked ZSET, KEYS[6] = djwork:result-waiters HASH, KEYS[7] = djwork:dead-bytes STRING
-- (only read when trimming)
-- ARGV[1] = raw payload as fetched, ARGV[2] = new payload JSON ('' = drop, file nowhere),
-- ARGV[3] = score, ARGV[4] = '0', or the byte cap of dead to trim it (dead_lib), ARGV[5] = dead cutoff score,
-- ARGV[6] = dead max size (entries),
-- ARGV[7] = "1" when KEYS[1] is an in-progress list to remove from, "2" the same but filing only a job still
-- on it (a poison pill's burial, which two reapers may both be handed), ARGV[8] = jid ('' = none),
-- ARGV[9] = the job's ties, "\n"-separated (djwork/job_locks.py): lock keys, released when the filing
-- ends the job (dead, drop; a retry keeps them), and its b-<bid> batch, told retry or dead (ties_lib),
-- ARGV[10] = its result HASH key, ARGV[11] = its result spec ('' for none: the job stores no result;
-- result_lib)
-- Returns 1, or 0 when ARGV[7] is "2" and the job is no longer on the list (filed already).
--@include ties_lib
--@include result_lib
--@include dead_lib
-- Two reapers that saw the same dead process both get its poison pill to bury (it stays on the list
-- until buried, so a reaper that dies first leaves it to the next); each burial filed a copy in dead.
if ARGV[7] == '2' and not redis.call('LPOS', KEYS[1], ARGV[1]) then
  return 0
end
local retrying = ARGV[2] ~= '' and KEYS[2] ~= KEYS[3]
if retrying and ARGV[8] ~= '' and KEYS[5] and redis.call('EXISTS', KEYS[5]) == 1
    and result_revoked(KEYS[5], ARGV[8], clock_now()) then
  retrying = false
elseif ARGV[2] ~= '' then
  dead_file(KEYS[2], KEYS[3], KEYS[7], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
end
if ARGV[7] ~= '0' then
  redis.call('LREM', KEYS[1], -1, ARGV[1])
end
if ARGV[8] ~= '' then
  redis.call('HDEL', KEYS[4], ARGV[8])
  -- A retry keeps the job's locks and counts it as failed in its batch; dead and drop end it.
  ties_end(ARGV[9] or '', ARGV[8], retrying and 'retrying' or 'died')
end
if ARGV[10] and ARGV[10] ~= '' then
  result_store(result_guard(KEYS[5], KEYS[6]), ARGV[10], ARGV[11], ARGV[8])
end
return 1
