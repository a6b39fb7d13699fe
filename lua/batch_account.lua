-- batch_account: a batch's accounting on a Redis Cluster, in the batch's slot alone (docs/cluster.md,
-- batch_check). The rules and the once-only claims are lua/batch_lib.lua's, unchanged; what lies outside
-- the slot is recorded in the batch's hash instead of done: a fired callback as a pending field
-- `pcb-<event>-<n>` = "q\t<queue>\t<payload>" or "s\t<score>\t<payload>" (its claim, <event>_at, taken here,
-- once), and a child's outcome for its parent as `tell-<outcome>` = "<parent>\t<value>" (<value>: a canvas
-- child's value for its parent's results, the task that died in it, or ''). djwork/batches/cluster_accounting.py
-- pushes each pending callback (push_once, named by the field), tells the parent, then clears the fields
-- (lua/batch_clear.lua); a crash between leaves them for the next call on this batch, which returns them again.
-- KEYS[1] = b-<bid> HASH (its companions, {b-<bid>}-jids and the rest, share its slot).
-- ARGV[1] = 'end' (a member ended), 'check' (decide its events now: a batch just made empty) or 'pending'
-- (only read what is pending); for 'end': ARGV[2] = the member (a jid, or a child's b-<bid>, or a hold),
-- ARGV[3] = ok, retrying or died, ARGV[4] = who ended ('=': the member; '': no task), ARGV[5] = the member's
-- result to keep on ok ('' none: raw JSON, kept only by a batch that keeps results), or on died a child
-- batch's failed task (kept as `died-b-<child>` for an errback's id).
-- Returns a flat array of the pending fields and their values.
--@include batch_lib
--@keys cluster_batch_jids cluster_batch_failed cluster_batch_died cluster_batch_order cluster_batch_results
keys.batch_jids, keys.batch_failed, keys.batch_died = keys.cluster_batch_jids, keys.cluster_batch_failed,
  keys.cluster_batch_died
keys.batch_order, keys.batch_results = keys.cluster_batch_order, keys.cluster_batch_results

local hash = KEYS[1]
local fired = 0  -- callbacks recorded by this call: canvas_push_more may fire several for one event

-- canvas: an errback's failed id. A died child canvas's own failed task is in the child's slot, so the child
-- hands it over with its death (its tell's value), kept here as the field `died-b-<child>`.
local function died_jid(bid)
  local member = redis.call('SRANDMEMBER', keys.batch_died(bid))
  if member and batch_bid(member) then
    return redis.call('HGET', keys.batch(bid), 'died-' .. member) or member
  end
  return member or ''
end

canvas_died_jid = function(bid)
  return cjson.encode(died_jid(bid))
end

batch_deliver = function(_hash, event, queue, delay, payload, now)
  fired = fired + 1
  local value
  if delay and delay > 0 then
    value = 's\t' .. string.format('%.6f', tonumber(now) + delay) .. '\t' .. payload .. '}'
  else
    value = 'q\t' .. queue .. '\t' .. payload .. ',"enqueued_at":' .. now .. '}'
  end
  redis.call('HSET', hash, 'pcb-' .. event .. '-' .. fired, value)
end

batch_tell_parent = function(bid, parent, outcome)
  local value = ''
  if outcome == 'ok' then
    local kind = redis.call('HGET', keys.batch(bid), 'value')
    if kind then value = canvas_value_json(bid, kind) end
  elseif outcome == 'died' then
    value = died_jid(bid)  -- the task that died, for an errback of the parent's (canvas_died_jid)
  end
  redis.call('HSET', hash, 'tell-' .. outcome, parent .. '\t' .. value)
end

local bid = batch_bid(hash)
if ARGV[1] == 'end' then
  local member, outcome, by = ARGV[2], ARGV[3], ARGV[4]
  if by == '=' then by = member end
  if ARGV[5] ~= '' and outcome == 'ok' then batch_keep(bid, member, ARGV[5]) end
  if ARGV[5] ~= '' and outcome == 'died' and batch_bid(member) then
    redis.call('HSET', hash, 'died-' .. member, ARGV[5])  -- a child's failed task (died_jid)
  end
  batch_end(bid, member, outcome, by)
elseif ARGV[1] == 'check' then
  batch_check(bid)
end
local found = {}
local fields = redis.call('HGETALL', hash)
for i = 1, #fields, 2 do
  local name = fields[i]
  if string.sub(name, 1, 4) == 'pcb-' or string.sub(name, 1, 5) == 'tell-' then
    found[#found + 1] = name
    found[#found + 1] = fields[i + 1]
  end
end
return found
