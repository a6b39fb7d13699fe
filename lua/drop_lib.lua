-- drop_lib: a taken copy of a job that must not run is dropped where it was taken, instead of run: one that
-- already finished after its process's shutdown deadline (djwork:finished-late, lua/settle_late.lua) here,
-- one revoked in lua/revoke_lib.lua. For fetch.lua (each fetched job) and the queue waiter's take
-- (drop_finished_late.lua). A library: djwork/scripts.py puts this text where a script has the line
-- `--@include drop_lib`. KEYS and ARGV: none of its own; the keys come from the caller's KEYS.
-- Returns nothing.
--@include job_lib
--@include locks_lib

-- Take the copy off the taker's in-progress list ('' when a basic fetch popped it: nothing to take off)
-- and clear its orphan count. pcall: a broken orphan-counts hash must not fail the step that took the job.
local function drop_copy(in_progress, orphan_counts, payload, jid)
  if in_progress ~= '' then redis.call('LREM', in_progress, -1, payload) end
  redis.pcall('HDEL', orphan_counts, jid)
end

-- Drop `payload` if its jid is marked finished-late (the mark is used up); returns the jid, else nil.
-- The copy ends as its finish would have: the locks it still owns are released. Its batch is not told:
-- it counted the job when the mark was made.
local function drop_if_finished_late(finished_late, in_progress, orphan_counts, payload)
  local jid, job = job_decode(payload)
  if not jid or redis.call('HDEL', finished_late, jid) == 0 then return nil end
  drop_copy(in_progress, orphan_counts, payload, jid)
  locks_release_job(job, jid)
  return jid
end
