-- drop_finished_late: a taker took a job while djwork:finished-late was not empty.
-- If the job's jid is marked there (it already finished after its process's
-- shutdown deadline; settle_late.lua), drop this copy instead of running it
-- again: unmark it and remove it from the taker's in-progress list (lua/drop_lib.lua).
-- KEYS[1] = djwork:finished-late HASH, KEYS[2] = in-progress LIST, KEYS[3] = djwork:orphan-counts HASH
-- ARGV[1] = raw payload
-- Returns the jid when dropped, else false.
--@include drop_lib
return drop_if_finished_late(KEYS[1], KEYS[2], KEYS[3], ARGV[1]) or false
