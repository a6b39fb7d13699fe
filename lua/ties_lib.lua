-- ties_lib: what a job is tied to, ended with it (djwork/job_locks.py): its locks, released if it still
-- owns them (lua/locks_lib.lua), and its batch, told how it ended (lua/batch_lib.lua). Every script that
-- ends a job (ack, burial, drop, delete, revoke) ends its ties through here, in the same step. A library:
-- djwork/redis/scripts.py puts this text where a script has the line `--@include ties_lib`. KEYS and ARGV: none
-- of its own. Returns nothing.
--
-- A tie list is text, one tie a line (djwork/job_locks.py encodes it): a lock key, or a batch's b-<bid>,
-- which may carry the job's return value after a tab (job_locks.with_result), kept on 'ok'.
--@include locks_lib
--@include batch_lib
--@keys batch

-- The ties of a decoded job (djwork/job_locks.py's locks_of, for jobs that end inside Lua): the lock
-- keys it may name, then its batch's b-<bid> (a bid that could name another key is no batch).
local function ties_of_job(job)
  local ties = locks_of_job(job)
  local bid = job['bid']
  if type(bid) == 'string' and #bid <= 64 and string.match(bid, '^[%w_-]+$') then
    ties[#ties + 1] = keys.batch(bid)
  end
  return table.concat(ties, '\n')
end

-- End `jid`'s ties with `outcome` ('ok', 'retrying' or 'died', as batch_end takes it): its locks are released,
-- except on 'retrying' (the job lives on), and skipped altogether with `batches_only` (a job that succeeded
-- while a copy of it still holds its locks). A batch whose keys are broken logs and is skipped: it must
-- not fail the ack of the jobs beside it. Returns the number of locks released.
local function ties_end(list, jid, outcome, batches_only)
  local released = 0
  if jid == '' or not list or list == '' then return released end
  for line in string.gmatch(list, '[^\n]+') do
    local key, value = string.match(line, '^([^\t]*)\t(.*)$')
    key = key or line
    local bid = batch_bid(key)
    if bid then
      local ok, err = pcall(function()
        if value and outcome == 'ok' then batch_keep(bid, jid, value) end
        batch_end(bid, jid, outcome)
      end)
      if not ok then redis.log(redis.LOG_WARNING, 'djwork: batch ' .. key .. ' not counted: ' .. tostring(err)) end
    elseif outcome ~= 'retrying' and not batches_only then
      released = released + lock_release(key, jid)
    end
  end
  return released
end
