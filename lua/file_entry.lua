-- file_entry: a failed job filed in `retry` or `dead`, `dead` trimmed, in that set's slot (Redis Cluster).
-- The first step of a cluster's failure filing (fail.lua does it all in one step on one server): the
-- job is filed before it leaves its in-progress list (lua/drop_copy.lua, the queue's slot), so a crash
-- between leaves it in both, where orphan recovery runs it again: never lost. Filing the same member
-- again is one entry (ZADD), so the step is safe to repeat.
-- KEYS[1] = the target ZSET (retry or dead), KEYS[2] = dead's byte counter (djwork:dead-bytes:{dead}),
-- only when filing in dead
-- ARGV[1] = payload, ARGV[2] = score, ARGV[3] = '0', or the byte cap of dead to trim it (dead_lib),
-- ARGV[4] = dead cutoff score, ARGV[5] = dead max size (entries)
-- Returns 1.
--@include dead_lib
dead_file(KEYS[1], KEYS[1], KEYS[2] or KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
return 1
