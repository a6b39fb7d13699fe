-- lane_lib: a queue's priority lanes (docs/priority.md). A library: djwork/redis/scripts.py puts this text
-- where a script has the line `--@include lane_lib`. KEYS and ARGV: none of its own. Returns nothing.
-- A lane is a whole number -9..9 but 0, higher taken first; lane 0 is the queue's own list. A lane's list
-- is registered in its queue's lanes SET after every push to it and unregistered by the fetch that finds it
-- empty, so a worker reads no lane of a queue that has none (djwork/redis/lanes.py).
--@keys lane

-- The lane a raw payload asks for, or nil (the queue's own list). Only a payload whose text names the field
-- is decoded; a lane out of range is the queue's own list, as djwork/redis/lanes.py reads it.
local function lane_of(raw)
  if not string.find(raw, '"lane":', 1, true) then return nil end
  local ok, job = pcall(cjson.decode, raw)
  if not ok or type(job) ~= 'table' then return nil end
  local lane = job['lane']
  if type(lane) ~= 'number' or lane ~= math.floor(lane) or lane == 0 or lane < -9 or lane > 9 then return nil end
  return string.format('%d', lane)
end

-- Push `raw` (with `command`: RPUSH to its pop end, LPUSH to its back) onto the list it waits on: its lane of
-- queue `name`, registered in `lanes_key` after the push, or `queue_key`. Returns the push's reply.
local function lane_push(command, queue_key, lanes_key, name, raw)
  -- No name: the caller gives no lanes (a job given back to the isolated list stays there, lane or not).
  local lane = name ~= '' and lane_of(raw)
  if not lane then return redis.call(command, queue_key, raw) end
  local pushed = redis.call(command, keys.lane(name, lane), raw)
  redis.call('SADD', lanes_key, lane)
  return pushed
end

-- The lanes registered in `lanes_key`, as two lists of {number, member, list key}, each highest first: those above
-- the queue's own list and those below it. Returns the error reply instead when the SET can't be read.
local function lanes_registered(lanes_key, name)
  local members = redis.pcall('SMEMBERS', lanes_key)
  if type(members) == 'table' and members['err'] then return nil, nil, members end
  local upper, lower = {}, {}
  for _, member in ipairs(members) do
    local lane = tonumber(member)
    if lane and lane > 0 then
      upper[#upper + 1] = {lane, member}
    elseif lane and lane < 0 then
      lower[#lower + 1] = {lane, member}
    end
  end
  local function highest_first(a, b) return a[1] > b[1] end
  table.sort(upper, highest_first)
  table.sort(lower, highest_first)
  for _, side in ipairs({upper, lower}) do
    for _, entry in ipairs(side) do entry[3] = keys.lane(name, entry[2]) end
  end
  return upper, lower, nil
end
