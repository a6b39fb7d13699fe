-- drop_finished_late: a taker took a job while djwork:finished-late was not empty.
-- If the job's jid is marked there (it already finished after its process's
-- shutdown deadline; settle_late.lua), drop this copy instead of running it
-- again: unmark it and remove it from the taker's in-progress list.
-- KEYS[1] = djwork:finished-late HASH, KEYS[2] = in-progress LIST, KEYS[3] = djwork:orphan-counts HASH
-- ARGV[1] = raw payload
-- Returns the jid when dropped, else false.
local ok, job = pcall(cjson.decode, ARGV[1])
local jid = ok and type(job) == 'table' and job['jid']
if type(jid) ~= 'string' or redis.call('HDEL', KEYS[1], jid) == 0 then
  return false
end
-- The copy ends here, as its finish would have: release the locks it still owns (djwork/job_locks.py).
local function release_locks_of(job, jid)
  if type(job['djwork_locks']) ~= 'table' then return end
  for _, key in ipairs(job['djwork_locks']) do
    if type(key) == 'string' and (string.sub(key, 1, 7) == 'unique:'
        or string.sub(key, 1, 24) == 'djwork:periodic-running:') and redis.pcall('GET', key) == jid then
      redis.call('DEL', key)
    end
  end
end
redis.call('LREM', KEYS[2], -1, ARGV[1])
redis.call('HDEL', KEYS[3], jid)
release_locks_of(job, jid)
return jid
