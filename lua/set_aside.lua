-- set_aside: move a whole queue or sorted set out of the way in one step, for a clear that must
-- still release the locks its jobs own (djwork/api/clearing.py). New pushes land in a fresh key
-- at once; the caller then walks the copy, releases each job's locks, and deletes it. The copy
-- expires in a day, so a clear interrupted half way can't leave it for good.
-- KEYS[1] = the queue LIST or the sorted set, KEYS[2] = the copy's name, KEYS[3] = `queues` SET
-- ARGV[1] = queue name to drop from `queues` ('' for a sorted set)
-- Returns how many entries were set aside.
local kind = redis.call('TYPE', KEYS[1])['ok']
local size = 0
if kind == 'list' then
  size = redis.call('LLEN', KEYS[1])
elseif kind == 'zset' then
  size = redis.call('ZCARD', KEYS[1])
end
if size > 0 then
  redis.call('RENAME', KEYS[1], KEYS[2])
  redis.call('EXPIRE', KEYS[2], 86400)
elseif kind ~= 'none' then
  redis.call('UNLINK', KEYS[1])
end
if ARGV[1] ~= '' then
  redis.call('SREM', KEYS[3], ARGV[1])
end
return size
