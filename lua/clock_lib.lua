-- clock_lib: Redis's clock, for every script that decides or stamps on time. One clock for all hosts:
-- a host whose clock is off can neither make a live process look dead nor stamp a job out of order.
-- A library: djwork/scripts.py puts this text where a script has the line `--@include clock_lib`.
-- KEYS and ARGV: none of its own. Returns nothing.

-- Whole seconds and microseconds since the epoch, as TIME answers them.
local function clock_read()
  local t = redis.call('TIME')
  return tonumber(t[1]), tonumber(t[2])
end

-- Seconds since the epoch, to the microsecond (a float).
local function clock_now()
  local seconds, micros = clock_read()
  return seconds + micros / 1000000
end
