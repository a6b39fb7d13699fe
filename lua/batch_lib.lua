-- batch_lib: what a job's end does to its batch (docs/batches.md). A library, not a script of its own:
-- djwork/scripts.py puts this text where a script has the line `--@include batch_lib`, so the
-- batch's accounting runs in the same Lua step as the ack, retry or burial that ends the job.
-- (Loaded alone, as load_all does, it only defines functions.) KEYS and ARGV: none of its own; its
-- functions take the b-<bid> key and the jid from their caller. Returns nothing.
--
-- Accounting is by set membership, never by a counter: SREM of a jid answers 1 once, so a job
-- run twice (orphan recovery after kill -9, a late finish) cannot count twice or drive pending
-- below 0, and a retried job cannot be counted as finished before it succeeds.
--   b-<bid>          HASH  total description created_at cbq cb-<event> <event>_at invalidated keep_results
--                          parent kids; a canvas's also canvas cx-<event> cbn-<event> cb-<event>-<i> value
--   b-<bid>-jids     SET   pending: not succeeded, not dead (jids, and b-<bid> of child batches)
--   b-<bid>-failed   SET   pending jids that failed at least once (each waits for a retry)
--   b-<bid>-died     SET   jids that died (dead set, dropped, deleted) and have not succeeded since
--   b-<bid>-order    LIST, b-<bid>-results HASH: member results in order (batches that keep them)
-- Events, each claimed once by HSETNX <event>_at (so its callback is pushed exactly once):
--   death (the first job died), complete (every job ran: pending == failed), success (nothing
--   pending, nothing dead), settled (nothing pending: each job succeeded or died).
-- The claim pushes the callback: the cb-<event> head the client stored (a job payload without
-- its closing brace) closed here with args = [status] and its timestamps, LPUSHed on queue:<cbq>.
local BATCH_LINGER = 86400  -- seconds the keys stay after success (status stays readable)
local BATCH_SUFFIXES = {'', '-jids', '-failed', '-died', '-order', '-results'}

local function batch_time()
  local t = redis.call('TIME')
  return string.format('%d.%06d', t[1], t[2])
end

-- Members' results, in the order they were added (batches that keep them): raw JSON, spliced,
-- never re-encoded; the chord's extension point (no result backend to poll).
local function batch_results_json(hash)
  local jids = redis.call('LRANGE', hash .. '-order', 0, -1)
  local values = {}
  for i = 1, #jids, 500 do
    local chunk = redis.call('HMGET', hash .. '-results', unpack(jids, i, math.min(i + 499, #jids)))
    for _, value in ipairs(chunk) do values[#values + 1] = value or 'null' end
  end
  return '[' .. table.concat(values, ',') .. ']'
end

local function batch_status_json(hash, event, now)
  local text = cjson.encode({
    bid = string.sub(hash, 3), event = event, at = tonumber(now),
    total = tonumber(redis.call('HGET', hash, 'total') or '0'),
    pending = redis.call('SCARD', hash .. '-jids'), failures = redis.call('SCARD', hash .. '-failed'),
    dead = redis.call('SCARD', hash .. '-died'), description = redis.call('HGET', hash, 'description') or ''})
  if event == 'success' and redis.call('HEXISTS', hash, 'keep_results') == 1 then
    text = string.sub(text, 1, -2) .. ',"results":' .. batch_results_json(hash) .. '}'
  end
  return text
end

-- canvas: an errback's first argument (shape `died`: Celery passes the failed task's id): a member of
-- the batch's died set, followed down into a dead child batch's own until it is a job's jid.
local function canvas_died_jid(hash)
  local member = redis.call('SRANDMEMBER', hash .. '-died')
  for _ = 1, 64 do
    if not member or string.sub(member, 1, 2) ~= 'b-' then break end
    local inner = redis.call('SRANDMEMBER', member .. '-died')
    if not inner then break end
    member = inner
  end
  return cjson.encode(member or '')
end

-- The canvas's hook (djwork/canvas, docs/canvas.md): a field cx-<event> = "<shape>\t<queue>\t<delay>\t<args>"
-- makes the callback a Celery signature: args = <args> (a JSON array) after the results (shape
-- `one`: the only member's result, a chain's step; `all`: every result in order, a chord's body),
-- after the status (`status`), after a failed jid (`died`: an errback), or alone (`none`: an immutable
-- signature); pushed to <queue>, or scheduled <delay> seconds later. Returns the args text, queue and delay.
local function batch_canvas_args(hash, spec, status)
  local shape, queue, delay, rest = string.match(spec, '^(%a+)\t([^\t]+)\t([^\t]+)\t(.*)$')
  if not shape then return '[' .. status .. ']', nil, 0 end
  local first = status
  if shape == 'none' then return rest, queue, tonumber(delay) end
  if shape == 'died' then first = canvas_died_jid(hash) end
  if shape == 'all' or shape == 'one' then
    first = batch_results_json(hash)
    if shape == 'one' then  -- a one-member batch: '[x]' -> 'x'
      first = string.sub(first, 2, -2)
      if first == '' then first = 'null' end
    end
  end
  if rest == '[]' then return '[' .. first .. ']', queue, tonumber(delay) end
  return '[' .. first .. ',' .. string.sub(rest, 2), queue, tonumber(delay)
end

-- Pushes one callback: `head` (a job payload without its closing brace) closed with its args and times.
local function batch_push(hash, event, head, spec, status, now)
  local queue = redis.call('HGET', hash, 'cbq') or 'default'
  local args, delay = '[' .. status .. ']', 0
  if spec then  -- a canvas signature (batch_canvas_args)
    local own_queue
    args, own_queue, delay = batch_canvas_args(hash, spec, status)
    queue = own_queue or queue
  end
  local payload = head .. ',"args":' .. args .. ',"created_at":' .. now
  local pushed
  if delay and delay > 0 then
    pushed = redis.pcall('ZADD', 'schedule', string.format('%.6f', tonumber(now) + delay), payload .. '}')
    if not (type(pushed) == 'table' and pushed['err']) then return end
  else
    pushed = redis.pcall('LPUSH', 'queue:' .. queue, payload .. ',"enqueued_at":' .. now .. '}')
  end
  if type(pushed) == 'table' and pushed['err'] then
    -- Kept where the status shows it: the claim stands (a second push could run it twice).
    redis.call('HSET', hash, event .. '_error', pushed['err'])
    return
  end
  redis.pcall('SADD', 'queues', queue)
end

-- canvas: a step followed by a group (or a chord's header, a group of chains) starts several jobs at
-- once: `cbn-<event>` counts the callbacks, the 2nd on in `cb-<event>-<i>` / `cx-<event>-<i>`.
local function canvas_push_more(hash, event, status, now)
  local count = tonumber(redis.call('HGET', hash, 'cbn-' .. event) or '1')
  for i = 2, count do
    local head = redis.call('HGET', hash, 'cb-' .. event .. '-' .. i)
    if head then
      batch_push(hash, event, head, redis.call('HGET', hash, 'cx-' .. event .. '-' .. i) or nil, status, now)
    end
  end
end

local function batch_fire(hash, event)
  local now = batch_time()  -- read only here: most job ends fire nothing
  if redis.call('HSETNX', hash, event .. '_at', now) == 0 then return end
  if redis.call('HEXISTS', hash, 'invalidated') == 1 then return end
  local head = redis.call('HGET', hash, 'cb-' .. event)
  if not head then return end
  local status = batch_status_json(hash, event, now)
  batch_push(hash, event, head, redis.call('HGET', hash, 'cx-' .. event) or nil, status, now)
  canvas_push_more(hash, event, status, now)
end

-- canvas: what a nested canvas batch hands its parent when it succeeds, by its field `value`: `all`
-- (every result in order: a group), `one` (its one member's: a step of one job), `last` (its last
-- member's: a chain inside a group, whose members are its steps' batches in order).
local function canvas_value_json(hash, kind)
  if kind == 'last' then
    local last = redis.call('LINDEX', hash .. '-order', -1)
    return (last and redis.call('HGET', hash .. '-results', last)) or 'null'
  end
  local all = batch_results_json(hash)
  if kind ~= 'one' then return all end
  all = string.sub(all, 2, -2)
  if all == '' then return 'null' end
  return all
end

-- canvas: the child's value kept as its parent's result of member b-<child>, in the step that counts
-- it: the parent's own success (a group's, a chain step's) splices it like any member's result.
local function canvas_keep_value(hash, parent)
  local kind = redis.call('HGET', hash, 'value')
  if not kind or redis.call('HEXISTS', parent, 'keep_results') == 0 then return end
  redis.call('HSET', parent .. '-results', hash, canvas_value_json(hash, kind))
  local ttl = redis.call('PTTL', parent)
  if ttl > 0 then redis.call('PEXPIRE', parent .. '-results', ttl) end
end

local batch_end  -- defined below: a child batch's state ends its membership in its parent

-- `failing` may be passed when the caller knows it (the ack's path: one SCARD fewer per job).
local function batch_check(hash, failing)
  local pending = redis.call('SCARD', hash .. '-jids')
  failing = failing or redis.call('SCARD', hash .. '-failed')
  local outcome = nil  -- what this batch is, as a member of its parent: ok, retry (ran, not done) or dead
  if pending == failing then
    batch_fire(hash, 'complete')
    outcome = 'retry'
  end
  if pending == 0 then
    outcome = 'dead'
    if redis.call('SCARD', hash .. '-died') == 0 then
      outcome = 'ok'
      batch_fire(hash, 'success')
      for _, suffix in ipairs(BATCH_SUFFIXES) do redis.call('EXPIRE', hash .. suffix, BATCH_LINGER) end
    end
    batch_fire(hash, 'settled')
  end
  if outcome then
    local parent = redis.call('HGET', hash, 'parent')
    if parent then
      if outcome == 'ok' then canvas_keep_value(hash, 'b-' .. parent) end
      -- The child is the member `b-<bid>` of its parent's sets: membership again, so telling the
      -- parent twice (every check of a settled child does) counts once.
      batch_end('b-' .. parent, hash, outcome)
    end
  end
end

-- outcome: 'ok' (succeeded, or dropped as expired), 'retry' (failed, will run again), 'dead'
-- (buried in dead, dropped after failing, or deleted: it will not run again). `jid` is a job's
-- jid, or a child batch's b-<bid>.
-- canvas: a canvas batch that lost a member has failed as a whole (a chain stops there, its later steps
-- never run and stay pending, so it would never settle): its parent hears `dead` now, so a group of
-- chains fails when one of them does. Membership again: telling it twice counts once.
local function canvas_fail_parent(hash)
  if redis.call('HEXISTS', hash, 'canvas') == 0 then return end
  local parent = redis.call('HGET', hash, 'parent')
  if parent then batch_end('b-' .. parent, hash, 'dead') end
end

batch_end = function(hash, jid, outcome)
  if outcome == 'ok' then
    -- The path every successful job takes: three commands while nothing fires. SREM on a batch
    -- whose keys expired removes nothing, so no EXISTS is needed here.
    if redis.call('SREM', hash .. '-jids', jid) == 1 then
      local failing = redis.call('SCARD', hash .. '-failed')
      if failing > 0 then failing = failing - redis.call('SREM', hash .. '-failed', jid) end
      batch_check(hash, failing)
    elseif redis.call('SREM', hash .. '-died', jid) == 1 then
      batch_check(hash)  -- a dead job retried by hand has succeeded
    end
    return
  end
  if redis.call('EXISTS', hash) == 0 then return end  -- expired or never made: create nothing
  if outcome == 'retry' then
    if redis.call('SISMEMBER', hash .. '-jids', jid) == 0 or redis.call('SADD', hash .. '-failed', jid) == 0 then
      return
    end
  elseif redis.call('SREM', hash .. '-jids', jid) == 1 then
    redis.call('SREM', hash .. '-failed', jid)
    redis.call('SADD', hash .. '-died', jid)
  else
    return
  end
  local ttl = redis.call('PTTL', hash)  -- sets made here live as long as the batch
  if ttl > 0 then
    redis.call('PEXPIRE', hash .. '-failed', ttl)
    redis.call('PEXPIRE', hash .. '-died', ttl)
  end
  if outcome == 'dead' then
    batch_fire(hash, 'death')
    canvas_fail_parent(hash)
  end
  batch_check(hash)
end

-- A succeeded member's return value (raw JSON), kept in this same step as its ack, before its batch is
-- told: the success it may fire splices every result (batch_results_json). Only for a batch that keeps
-- results; the results live as long as the batch. Written by the client, it was lost when Redis was
-- away at the job's end, and the ack that followed handed `null` to the next step.
local function batch_keep(hash, jid, value)
  if redis.call('HEXISTS', hash, 'keep_results') == 0 then return end
  redis.call('HSET', hash .. '-results', jid, value)
  local ttl = redis.call('PTTL', hash)
  if ttl > 0 then redis.call('PEXPIRE', hash .. '-results', ttl) end
end

-- A job's ties (djwork/job_locks.py, "\n"-separated): a lock key is deleted if `jid` still owns it,
-- except on 'retry' (the job lives on); a b-<bid> line is its batch, told the outcome. A batch line
-- may carry the job's return value after a tab (djwork/job_locks.py's with_result), kept on 'ok'. A
-- batch whose keys are broken logs and is skipped: it must not fail the ack of the jobs beside it.
local function ties_end(list, jid, outcome)
  if jid == '' or not list or list == '' then return end
  for line in string.gmatch(list, '[^\n]+') do
    local key, value = string.match(line, '^([^\t]*)\t(.*)$')
    key = key or line
    if string.sub(key, 1, 2) == 'b-' then
      local ok, err = pcall(function()
        if value and outcome == 'ok' then batch_keep(key, jid, value) end
        batch_end(key, jid, outcome)
      end)
      if not ok then redis.log(redis.LOG_WARNING, 'djwork: batch ' .. key .. ' not counted: ' .. tostring(err)) end
    elseif outcome ~= 'retry' and redis.pcall('GET', key) == jid then
      redis.call('DEL', key)
    end
  end
end
