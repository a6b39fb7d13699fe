-- drop_copy: a job taken off this process's in-progress list and its recovery count retired (Redis Cluster).
-- The last step of a cluster's failure filing and poison-pill burial, after the job was filed in `retry`
-- or `dead` in their slot (lua/file_entry.lua): the removal comes last, so nothing is lost. Repeating
-- it removes nothing more.
-- KEYS[1] = the in-progress LIST, KEYS[2] = the queue's orphan-counts HASH (one slot by the tag)
-- ARGV[1] = the raw payload as fetched, ARGV[2] = its jid ('' = none)
-- Returns the number of copies removed (0 or 1).
local removed = redis.call('LREM', KEYS[1], -1, ARGV[1])
if ARGV[2] ~= '' then redis.pcall('HDEL', KEYS[2], ARGV[2]) end
return removed
