-- drop_revoked: a taker took a job while djwork:revoked was not empty (docs/celery.md, Revoke).
-- If the job is revoked, drop this copy instead of running it: remove it from the taker's
-- in-progress list (reliable fetch; basic fetch already popped it), clear its orphan count,
-- release its locks and tell its batch it died, as fetch.lua does for a fetched one.
-- KEYS[1] = djwork:revoked ZSET, KEYS[2] = in-progress LIST ('' in basic fetch),
-- KEYS[3] = djwork:orphan-counts HASH
-- ARGV[1] = raw payload
-- Returns the jid when dropped, else false.
--@include result_lib
local jid, job = result_jid_of(ARGV[1])
if not jid or not result_revoked(KEYS[1], jid, result_now()) then
  return false
end
if KEYS[2] ~= '' then
  redis.call('LREM', KEYS[2], -1, ARGV[1])
end
redis.call('HDEL', KEYS[3], jid)
ties_end(result_job_ties(job), jid, 'dead')
return jid
