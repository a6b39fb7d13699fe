-- batch_join: a running canvas's batch joined by new members on a Redis Cluster, in the batch's slot alone
-- (docs/cluster.md, Canvases: replace() and add_to_chord()). One server joins the batch in the MULTI that
-- writes the new plans and pushes their first jobs (djwork/canvas/replace.py); on a cluster the new plans are
-- written first, each in its own slot (djwork/canvas/cluster_plan.py), then this step, then the first jobs.
-- Those jobs are kept here as pending callbacks (`pcb-join-<token>-<n>` = "q\t<queue>\t<payload>" or
-- "s\t<score>\t<payload>", lua/batch_account.lua's form) in the same step as the membership, so a crash
-- before they are pushed leaves them where the next end of a member (the running job's own, at the latest)
-- or the leader's sweep finds and pushes them, once (push_once, named by the field).
-- Counted once by member: a slot already in the pending set adds nothing, so a repeat changes nothing.
-- KEYS[1] = b-<bid> HASH (its companions share its slot).
-- ARGV[1] = 'replace': ARGV[2] = the replaced job's jid, ARGV[3] = its replacement's slot (b-<child>), which
--   takes the jid's place in the order list (the value handed on is the replacement's); or
--   'add': ARGV[2] = n, ARGV[3 .. 2+n] = the new slots, appended to the order (add_to_chord).
-- Then field, value pairs: the pending first jobs.
-- Returns 1 when joined, 0 when not (replace: the jid is gone from the order, an earlier run replaced it).
--@keys BATCH_PREFIX cluster_batch_jids cluster_batch_order
local hash = KEYS[1]
local bid = string.sub(hash, #keys.BATCH_PREFIX + 1)
local jids, order = keys.cluster_batch_jids(bid), keys.cluster_batch_order(bid)
local first
if ARGV[1] == 'replace' then
  local place = redis.call('LPOS', order, ARGV[2])
  if not place then return 0 end
  redis.call('LSET', order, place, ARGV[3])
  if redis.call('SADD', jids, ARGV[3]) == 1 then redis.call('HINCRBY', hash, 'kids', 1) end
  first = 4
else
  local count = tonumber(ARGV[2])
  for i = 3, 2 + count do
    if redis.call('SADD', jids, ARGV[i]) == 1 then
      redis.call('RPUSH', order, ARGV[i])
      redis.call('HINCRBY', hash, 'total', 1)
    end
  end
  first = 3 + count
end
for i = first, #ARGV, 2 do
  redis.call('HSET', hash, ARGV[i], ARGV[i + 1])
end
return 1
