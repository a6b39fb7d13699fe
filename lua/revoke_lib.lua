-- revoke_lib: a revoked job met inside a script (docs/celery.md, Revoke): a taken copy of it is dropped
-- instead of run, for fetch.lua (each fetched job) and the queue waiter's take (drop_revoked.lua). A
-- library: djwork/redis/scripts.py puts this text where a script has the line `--@include revoke_lib`. KEYS and
-- ARGV: none of its own; the keys come from the caller's KEYS. Returns nothing.
--@include drop_lib
--@include ties_lib
--@include result_lib

-- Drop `payload` if its jid is revoked at `now`; returns the jid, else nil. It will not run: its locks
-- are released and its batch counts it as died.
local function drop_if_revoked(revoked, in_progress, orphan_counts, payload, now)
  local jid, job = job_decode(payload)
  if not jid or not result_revoked(revoked, jid, now) then return nil end
  drop_copy(in_progress, orphan_counts, payload, jid)
  ties_end(ties_of_job(job), jid, 'died')
  return jid
end
