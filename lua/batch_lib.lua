-- batch_lib: what a job's end does to its batch (docs/batches.md). A library, not a script of its own:
-- djwork/redis/scripts.py puts this text where a script has the line `--@include batch_lib`, so the
-- batch's accounting runs in the same Lua step as the ack, retry or burial that ends the job.
-- (Loaded alone, as load_all does, it only defines functions.) KEYS and ARGV: none of its own; its
-- functions take the bid and the jid from their caller (lua/ties_lib.lua). Returns nothing.
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
--@include clock_lib
--@keys SCHEDULE QUEUES queue BATCH_PREFIX batch batch_jids batch_failed batch_died batch_order batch_results
local BATCH_LINGER = 86400  -- seconds the keys stay after success (status stays readable)

-- The bid of a batch's key (b-<bid>), nil for any other key: a job's ties and a parent's members name
-- batches by key.
local function batch_bid(key)
  if string.sub(key, 1, #keys.BATCH_PREFIX) == keys.BATCH_PREFIX then return string.sub(key, #keys.BATCH_PREFIX + 1) end
  return nil
end

local function batch_time()
  return string.format('%d.%06d', clock_read())
end

-- Members' results, in the order they were added (batches that keep them): raw JSON, spliced,
-- never re-encoded; the chord's extension point (no result backend to poll).
local function batch_results_json(bid)
  local jids = redis.call('LRANGE', keys.batch_order(bid), 0, -1)
  local results = keys.batch_results(bid)
  local values = {}
  for i = 1, #jids, 500 do
    local chunk = redis.call('HMGET', results, unpack(jids, i, math.min(i + 499, #jids)))
    for _, value in ipairs(chunk) do values[#values + 1] = value or 'null' end
  end
  return '[' .. table.concat(values, ',') .. ']'
end

local function batch_status_json(bid, event, now)
  local hash = keys.batch(bid)
  local text = cjson.encode({
    bid = bid, event = event, at = tonumber(now),
    total = tonumber(redis.call('HGET', hash, 'total') or '0'),
    pending = redis.call('SCARD', keys.batch_jids(bid)), failures = redis.call('SCARD', keys.batch_failed(bid)),
    dead = redis.call('SCARD', keys.batch_died(bid)), description = redis.call('HGET', hash, 'description') or ''})
  if event == 'success' and redis.call('HEXISTS', hash, 'keep_results') == 1 then
    text = string.sub(text, 1, -2) .. ',"results":' .. batch_results_json(bid) .. '}'
  end
  return text
end

-- canvas: an errback's first argument (shape `died`: Celery passes the failed task's id): a member of
-- the batch's died set, followed down into a dead child batch's own until it is a job's jid.
-- A variable, as batch_deliver: a cluster's step can't follow a child into its slot (lua/batch_account.lua).
local canvas_died_jid = function(bid)
  local member = redis.call('SRANDMEMBER', keys.batch_died(bid))
  for _ = 1, 64 do
    local child = member and batch_bid(member)
    if not child then break end
    local inner = redis.call('SRANDMEMBER', keys.batch_died(child))
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
local function batch_canvas_args(bid, spec, status)
  local shape, queue, delay, rest = string.match(spec, '^(%a+)\t([^\t]+)\t([^\t]+)\t(.*)$')
  if not shape then return '[' .. status .. ']', nil, 0 end
  local first = status
  if shape == 'none' then return rest, queue, tonumber(delay) end
  if shape == 'died' then first = canvas_died_jid(bid) end
  if shape == 'all' or shape == 'one' then
    first = batch_results_json(bid)
    if shape == 'one' then  -- a one-member batch: '[x]' -> 'x'
      first = string.sub(first, 2, -2)
      if first == '' then first = 'null' end
    end
  end
  if rest == '[]' then return '[' .. first .. ']', queue, tonumber(delay) end
  return '[' .. first .. ',' .. string.sub(rest, 2), queue, tonumber(delay)
end

-- Delivers one fired callback, `payload` (a job payload without its closing brace): onto its queue, or
-- into `schedule` `delay` seconds after `now`. A variable, not a fixed function: a cluster's step
-- (lua/batch_account.lua) replaces it, since the queue lies outside the batch's slot there.
local batch_deliver = function(hash, event, queue, delay, payload, now)
  local pushed
  if delay and delay > 0 then
    pushed = redis.pcall('ZADD', keys.SCHEDULE, string.format('%.6f', tonumber(now) + delay), payload .. '}')
    if not (type(pushed) == 'table' and pushed['err']) then return end
  else
    pushed = redis.pcall('LPUSH', keys.queue(queue), payload .. ',"enqueued_at":' .. now .. '}')
  end
  if type(pushed) == 'table' and pushed['err'] then
    -- Kept where the status shows it: the claim stands (a second push could run it twice).
    redis.call('HSET', hash, event .. '_error', pushed['err'])
    return
  end
  redis.pcall('SADD', keys.QUEUES, queue)
end

-- Pushes one callback: `head` (a job payload without its closing brace) closed with its args and times.
-- `by`: the member whose end fired it ('' when unknown).
local function batch_push(bid, event, head, spec, status, now, by)
  local hash = keys.batch(bid)
  local queue = redis.call('HGET', hash, 'cbq') or 'default'
  local args, delay = '[' .. status .. ']', 0
  if spec then  -- a canvas signature (batch_canvas_args)
    local own_queue
    args, own_queue, delay = batch_canvas_args(bid, spec, status)
    queue = own_queue or queue
  end
  local payload = head .. ',"args":' .. args .. ',"created_at":' .. now
  if spec and string.sub(spec, 1, 4) == 'all\t' then
    -- canvas: Celery's parent_id of what runs after a group (a chord's body) is the header task whose end
    -- fired it; a nested canvas member's end, or none known, gives the group's own id.
    local parent = bid
    if by and by ~= '' and not batch_bid(by) then parent = by end
    payload = payload .. ',"parent_id":' .. cjson.encode(parent)
  end
  batch_deliver(hash, event, queue, delay, payload, now)
end

-- canvas: a step followed by a group (or a chord's header, a group of chains) starts several jobs at
-- once: `cbn-<event>` counts the callbacks, the 2nd on in `cb-<event>-<i>` / `cx-<event>-<i>`.
local function canvas_push_more(bid, event, status, now, by)
  local hash = keys.batch(bid)
  local count = tonumber(redis.call('HGET', hash, 'cbn-' .. event) or '1')
  for i = 2, count do
    local head = redis.call('HGET', hash, 'cb-' .. event .. '-' .. i)
    if head then
      batch_push(bid, event, head, redis.call('HGET', hash, 'cx-' .. event .. '-' .. i) or nil, status, now, by)
    end
  end
end

local function batch_fire(bid, event, by)
  local hash = keys.batch(bid)
  local now = batch_time()  -- read only here: most job ends fire nothing
  if redis.call('HSETNX', hash, event .. '_at', now) == 0 then return end
  if redis.call('HEXISTS', hash, 'invalidated') == 1 then return end
  local head = redis.call('HGET', hash, 'cb-' .. event)
  if not head then return end
  local status = batch_status_json(bid, event, now)
  batch_push(bid, event, head, redis.call('HGET', hash, 'cx-' .. event) or nil, status, now, by)
  canvas_push_more(bid, event, status, now, by)
end

-- canvas: what a nested canvas batch hands its parent when it succeeds, by its field `value`: `all`
-- (every result in order: a group), `one` (its one member's: a step of one job), `last` (its last
-- member's: a chain inside a group, whose members are its steps' batches in order).
local function canvas_value_json(bid, kind)
  if kind == 'last' then
    local last = redis.call('LINDEX', keys.batch_order(bid), -1)
    return (last and redis.call('HGET', keys.batch_results(bid), last)) or 'null'
  end
  local all = batch_results_json(bid)
  if kind ~= 'one' then return all end
  all = string.sub(all, 2, -2)
  if all == '' then return 'null' end
  return all
end

-- canvas: the child's value kept as its parent's result of member b-<child>, in the step that counts
-- it: the parent's own success (a group's, a chain step's) splices it like any member's result.
local function canvas_keep_value(bid, parent)
  local kind = redis.call('HGET', keys.batch(bid), 'value')
  if not kind or redis.call('HEXISTS', keys.batch(parent), 'keep_results') == 0 then return end
  local results = keys.batch_results(parent)
  redis.call('HSET', results, keys.batch(bid), canvas_value_json(bid, kind))
  local ttl = redis.call('PTTL', keys.batch(parent))
  if ttl > 0 then redis.call('PEXPIRE', results, ttl) end
end

local batch_end  -- defined below: a child batch's state ends its membership in its parent

-- A child batch's outcome told to its parent. A variable, as batch_deliver: a cluster's step records it
-- instead, the parent being in another slot there (lua/batch_account.lua).
local batch_tell_parent = function(bid, parent, outcome)
  if outcome == 'ok' then canvas_keep_value(bid, parent) end
  -- The child is the member `b-<bid>` of its parent's sets: membership again, so telling the
  -- parent twice (every check of a settled child does) counts once.
  batch_end(parent, keys.batch(bid), outcome)
end

-- `failing` may be passed when the caller knows it (the ack's path: one SCARD fewer per job); `by` is the
-- member whose end is being counted, when there is one (batch_push).
local function batch_check(bid, failing, by)
  local pending = redis.call('SCARD', keys.batch_jids(bid))
  failing = failing or redis.call('SCARD', keys.batch_failed(bid))
  local outcome = nil  -- what this batch is, as a member of its parent: ok, retry (ran, not done) or dead
  if pending == failing then
    batch_fire(bid, 'complete')
    outcome = 'retrying'
  end
  if pending == 0 then
    outcome = 'died'
    if redis.call('SCARD', keys.batch_died(bid)) == 0 then
      outcome = 'ok'
      batch_fire(bid, 'success', by)
      for _, key in ipairs({keys.batch(bid), keys.batch_jids(bid), keys.batch_failed(bid), keys.batch_died(bid),
                            keys.batch_order(bid), keys.batch_results(bid)}) do
        redis.call('EXPIRE', key, BATCH_LINGER)
      end
    end
    batch_fire(bid, 'settled')
  end
  if outcome then
    local parent = redis.call('HGET', keys.batch(bid), 'parent')
    if parent then batch_tell_parent(bid, parent, outcome) end
  end
end

-- canvas: a canvas batch that lost a member has failed as a whole (a chain stops there, its later steps
-- never run and stay pending, so it would never settle): its parent hears `dead` now, so a group of
-- chains fails when one of them does. Membership again: telling it twice counts once.
local function canvas_fail_parent(bid)
  local hash = keys.batch(bid)
  if redis.call('HEXISTS', hash, 'canvas') == 0 then return end
  local parent = redis.call('HGET', hash, 'parent')
  if parent then batch_tell_parent(bid, parent, 'died') end
end

-- outcome: 'ok' (succeeded, or dropped as expired), 'retrying' (failed, will run again), 'died'
-- (buried in dead, dropped after failing, or deleted: it will not run again). `jid` is a job's
-- jid, or a child batch's b-<bid>; `by`, who ended, is `jid` unless given ('': not a member's end).
batch_end = function(bid, jid, outcome, by)
  if by == nil then by = jid end
  local pending, failed, died = keys.batch_jids(bid), keys.batch_failed(bid), keys.batch_died(bid)
  if outcome == 'ok' then
    -- The path every successful job takes: three commands while nothing fires. SREM on a batch
    -- whose keys expired removes nothing, so no EXISTS is needed here.
    if redis.call('SREM', pending, jid) == 1 then
      local failing = redis.call('SCARD', failed)
      if failing > 0 then failing = failing - redis.call('SREM', failed, jid) end
      batch_check(bid, failing, by)
    elseif redis.call('SREM', died, jid) == 1 then
      batch_check(bid, nil, by)  -- a dead job retried by hand has succeeded
    end
    return
  end
  local hash = keys.batch(bid)
  if redis.call('EXISTS', hash) == 0 then return end  -- expired or never made: create nothing
  if outcome == 'retrying' then
    if redis.call('SISMEMBER', pending, jid) == 0 or redis.call('SADD', failed, jid) == 0 then
      return
    end
  elseif redis.call('SREM', pending, jid) == 1 then
    redis.call('SREM', failed, jid)
    redis.call('SADD', died, jid)
  else
    return
  end
  local ttl = redis.call('PTTL', hash)  -- sets made here live as long as the batch
  if ttl > 0 then
    redis.call('PEXPIRE', failed, ttl)
    redis.call('PEXPIRE', died, ttl)
  end
  if outcome == 'died' then
    batch_fire(bid, 'death')
    canvas_fail_parent(bid)
  end
  batch_check(bid, nil, by)
end

-- A succeeded member's return value (raw JSON), kept in this same step as its ack, before its batch is
-- told: the success it may fire splices every result (batch_results_json). Only for a batch that keeps
-- results; the results live as long as the batch. Written by the client, it was lost when Redis was
-- away at the job's end, and the ack that followed handed `null` to the next step.
local function batch_keep(bid, jid, value)
  local hash = keys.batch(bid)
  if redis.call('HEXISTS', hash, 'keep_results') == 0 then return end
  local results = keys.batch_results(bid)
  redis.call('HSET', results, jid, value)
  local ttl = redis.call('PTTL', hash)
  if ttl > 0 then redis.call('PEXPIRE', results, ttl) end
end
