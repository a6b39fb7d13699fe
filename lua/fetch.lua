-- fetch: settle finished jobs and take up to `limit` new ones, in one round trip.
-- Acks first (LREM from this process's in-progress list, and retire the job's
-- orphan-recovery counter), then, in the order given, move jobs from each
-- queue: reliable mode LMOVEs each into the queue's in-progress list, so a
-- process killed mid-job leaves its work where orphan recovery finds it;
-- basic mode RPOPs (Sidekiq's BRPOP semantics: a crash loses the job).
-- Paused queues (the `paused` SET) are skipped and reported.
-- KEYS[1] = paused SET, KEYS[2] = djwork:orphan-counts HASH,
-- KEYS[2+2i-1] = queue:<name_i>, KEYS[2+2i] = its in-progress LIST (i = 1..n)
-- ARGV[1] = limit, ARGV[2] = "reliable" | "basic", ARGV[3] = number of acks a,
-- ARGV[3+i] = name_i (i = 1..n, the names of the queues in KEYS, in the same order),
-- then a triples: queue index i, raw payload, jid
-- Returns {{i1, payload1, i2, payload2, ...}, {paused queue names...}}
local limit = tonumber(ARGV[1])
local reliable = ARGV[2] == 'reliable'
local ack_count = tonumber(ARGV[3])
local queue_count = (#KEYS - 2) / 2
local position = 4 + queue_count
for _ = 1, ack_count do
  local index = tonumber(ARGV[position])
  if reliable then
    redis.call('LREM', KEYS[2 + 2 * index], -1, ARGV[position + 1])
  end
  if ARGV[position + 2] ~= '' then
    redis.call('HDEL', KEYS[2], ARGV[position + 2])
  end
  position = position + 3
end
local fetched = {}
local paused = {}
local taken = 0
for i = 1, queue_count do
  if taken >= limit then break end
  local queue_key = KEYS[2 + 2 * i - 1]
  local name = ARGV[3 + i]
  if redis.call('SISMEMBER', KEYS[1], name) == 1 then
    paused[#paused + 1] = name
  else
    while taken < limit do
      local payload
      if reliable then
        payload = redis.call('LMOVE', queue_key, KEYS[2 + 2 * i], 'RIGHT', 'LEFT')
      else
        payload = redis.call('RPOP', queue_key)
      end
      if not payload then break end
      fetched[#fetched + 1] = i
      fetched[#fetched + 1] = payload
      taken = taken + 1
    end
  end
end
return {fetched, paused}
