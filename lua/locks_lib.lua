-- locks_lib: the locks bound to a job's life (djwork/job_locks.py: a unique job's lock, a no-overlap
-- periodic entry's running lock), each lock's value the jid that owns it. The one release, owner-checked,
-- and the one retake, for every script that ends, drops or requeues a job. A library: djwork/scripts.py
-- puts this text where a script has the line `--@include locks_lib`. KEYS and ARGV: none of its own.
-- Returns nothing.
--@keys JOB_LOCK_PREFIXES

-- Whether a payload may name `key` as its lock: under djwork's lock prefixes (keys.JOB_LOCK_PREFIXES,
-- the list djwork/job_locks.py checks too), so data anybody can write into a queue can't make a script
-- delete an arbitrary key; and no separator or oversized name, as job_locks.locks_of requires.
local function lock_allowed(key)
  if type(key) ~= 'string' or #key >= 512 or string.find(key, '\n', 1, true) then return false end
  for _, prefix in ipairs(keys.JOB_LOCK_PREFIXES) do
    if string.sub(key, 1, #prefix) == prefix then return true end
  end
  return false
end

-- Delete `key` if `jid` still owns it; returns 1 if it did. A lock that lapsed and was taken by another
-- jid since is left alone (a GET then a DEL from a client could delete it). pcall: a lock key of the
-- wrong type must not fail the step it rides in (an ack, a burial) nor the release of the others.
local function lock_release(key, jid)
  if lock_allowed(key) and redis.pcall('GET', key) == jid then
    redis.call('DEL', key)
    return 1
  end
  return 0
end

-- Release every lock a decoded payload names (`djwork_locks`) that `jid` still owns.
local function locks_release_job(job, jid)
  if type(job['djwork_locks']) ~= 'table' then return end
  for _, key in ipairs(job['djwork_locks']) do lock_release(key, jid) end
end

-- The allowed lock keys of a decoded payload, in its order.
local function locks_of_job(job)
  local found = {}
  if type(job['djwork_locks']) == 'table' then
    for _, key in ipairs(job['djwork_locks']) do
      if lock_allowed(key) then found[#found + 1] = key end
    end
  end
  return found
end

-- Hold `key` for `jid` with a fresh TTL when it is free or already `jid`'s, for a run that goes on
-- (requeued, or waiting for its retry); returns true, or what holds it instead: another jid (the
-- entry's next run started meanwhile), or the error reply of a key of the wrong type.
local function lock_retake(key, jid, ttl_ms)
  local holder = redis.pcall('GET', key)
  if holder == false or holder == jid then
    redis.call('SET', key, jid, 'PX', ttl_ms)
    return true
  end
  return holder
end
