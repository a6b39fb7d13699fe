-- file_once: a poison pill filed in `dead` once, however many reapers bury it (Redis Cluster).
-- Two reapers that both saw a process dead are both handed its poison pill (it stays on the in-progress
-- list until it is buried). On one server fail.lua files it only while it is still on the list; on a
-- cluster the list is in its queue's slot, so the burial is named instead, in dead's slot: by the list
-- and the copy on it (the caller's digest), remembered `horizon` seconds. The first burial of a name files
-- the job (lua/dead_lib.lua, as lua/file_entry.lua does); a second one files nothing, and its caller
-- still takes the copy off the list (lua/drop_copy.lua), which repeats harmlessly. The name and the
-- filing are one step, so a crash after it leaves the pill filed and on its list: the next pass hands it
-- again, and its burial only takes it off.
-- KEYS[1] = dead ZSET, KEYS[2] = dead's byte counter (djwork:dead-bytes:{dead}),
-- KEYS[3] = the burials ZSET, djwork:pill-burials:{dead} (burial name -> epoch seconds)
-- ARGV[1..5] = as lua/file_entry.lua (payload, score, the trim's byte cap, cutoff and size),
-- ARGV[6] = the burial's name, ARGV[7] = now (epoch seconds), ARGV[8] = horizon (seconds)
-- Returns 1 when filed, 0 when this burial had filed already.
--@include dead_lib
if redis.call('ZADD', KEYS[3], 'NX', ARGV[7], ARGV[6]) == 0 then
  return 0
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', tonumber(ARGV[7]) - tonumber(ARGV[8]))
dead_file(KEYS[1], KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
return 1
