-- quarantine_drop: a cluster's key guard deletes a wrong-type key it copied with DUMP and RESTORE
-- (lua/quarantine_move.lua with no head: a key whose braces let no copy share its slot), only if the key
-- still holds exactly what was copied. A key written meanwhile (fixed, or wrong in another way) stays, so
-- nothing is deleted that has no copy; the next check moves it again if it is still wrong.
-- KEYS[1] = the key
-- ARGV[1] = its DUMP as copied
-- Returns 1 when deleted, 0 when it changed since.
if redis.call('DUMP', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
