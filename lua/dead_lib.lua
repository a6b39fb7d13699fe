-- dead_lib: file a job in a sorted set, and trim `dead` after an addition, by age, by count and by bytes
-- (docs/wire.md, dead). A library: djwork/scripts.py puts this text where a script has the line
-- `--@include dead_lib`. KEYS and ARGV: none of its own. Returns nothing.
--
-- The byte total of `dead` is kept in a counter (djwork:dead-bytes, STRING): summing every member on every
-- filing would copy the whole set inside Redis each time. The counter is raised by each djwork addition and
-- lowered by each djwork trim; entries removed by anybody else (a dashboard delete, Sidekiq's UI) leave it
-- too high, entries added by anybody else too low. Once it reads over the cap, the members are summed from
-- the newest down, the oldest beyond DEAD_BYTES_KEEP of the cap are removed, and the counter is set to the
-- exact sum: an estimate too high costs one recount, never an entry. The newest entry is always kept, however
-- large: the cap must not lose the job being filed now.
local DEAD_BYTES_KEEP = 0.9  -- trimmed below the cap, so the next recount waits for a tenth of it in new entries

local function dead_sizes(members)
  local sum = 0
  for _, member in ipairs(members) do sum = sum + #member end
  return sum
end

local function dead_recount(dead, counter, cap)
  local target, kept, rank, chunk = math.floor(cap * DEAD_BYTES_KEEP), 0, 0, 200
  while true do
    local members = redis.call('ZREVRANGE', dead, rank, rank + chunk - 1)
    if #members == 0 then break end
    for _, member in ipairs(members) do
      if rank > 0 and kept + #member > target then
        redis.call('ZREMRANGEBYRANK', dead, 0, -(rank + 1))  -- everything older than the kept `rank` newest
        redis.call('SET', counter, kept)
        return
      end
      kept, rank = kept + #member, rank + 1
    end
  end
  redis.call('SET', counter, kept)
end

-- `added` is the member just added; `cutoff` the oldest score kept; `max_jobs`, `max_bytes` the caps.
local function dead_trim(dead, counter, added, cutoff, max_jobs, max_bytes)
  local gone = dead_sizes(redis.call('ZRANGEBYSCORE', dead, '-inf', '(' .. cutoff))
  redis.call('ZREMRANGEBYSCORE', dead, '-inf', '(' .. cutoff)
  local over = redis.call('ZCARD', dead) - max_jobs
  if over > 0 then
    gone = gone + dead_sizes(redis.call('ZRANGE', dead, 0, over - 1))
    redis.call('ZREMRANGEBYRANK', dead, 0, over - 1)
  end
  local total = redis.pcall('INCRBY', counter, #added - gone)
  if type(total) ~= 'number' then total = max_bytes + 1 end  -- not a count: recounted, and set right
  if total > max_bytes or total < 0 then dead_recount(dead, counter, max_bytes) end
end

-- Add `member` to the ZSET `target` at `score` (retry, or dead), then, when `cap` is not '0' (a filing into
-- `dead`: the byte cap as text), trim `dead` (its byte counter `counter`) to `cutoff` and `max_jobs`. Added
-- before anything else of the job moves: a script stopped by an error keeps what it wrote before.
local function dead_file(target, dead, counter, member, score, cap, cutoff, max_jobs)
  redis.call('ZADD', target, score, member)
  if cap ~= '0' then
    dead_trim(dead, counter, member, cutoff, tonumber(max_jobs), tonumber(cap))
  end
end
