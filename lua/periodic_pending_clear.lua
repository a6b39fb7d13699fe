-- periodic_pending_clear: the last step of a cluster's periodic claim: the pending job, pushed since
-- (lua/push_once.lua in its queue's slot), taken off the entry's state, if it is still the one pushed
-- (a later claim's pending job stays). Repeating it clears nothing more.
-- KEYS[1] = djwork:periodic:state:<id> HASH
-- ARGV[1] = the jid pushed
-- Returns 1 when cleared, else 0.
if redis.call('HGET', KEYS[1], 'pending_jid') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'pending_jid', 'pending_payload', 'pending_queue')
return 1
