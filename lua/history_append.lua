-- history_append: append a batch of execution records to the capped history stream.
-- The batch travels as one JSON argument: packing one short command is far
-- cheaper for the worker than one XADD (or nine arguments) per job, and the
-- numbers are formatted here, on Redis's core, not by the worker's GIL.
-- KEYS[1] = djwork:history STREAM
-- ARGV[1] = approximate max length, ARGV[2] = JSON array of field names,
-- ARGV[3] = JSON array of records, each [jid, class, queue, status, started (float seconds),
--           duration (float ms), error_class, error_message], ARGV[4] = the worker's identity
-- Returns the number of records appended.
local names = cjson.decode(ARGV[2])
local records = cjson.decode(ARGV[3])
for _, record in ipairs(records) do
  record[5] = string.format('%.6f', record[5])
  record[6] = string.format('%.3f', record[6])
  record[9] = ARGV[4]
  local fields = {}
  for i, name in ipairs(names) do
    fields[#fields + 1] = name
    fields[#fields + 1] = record[i]
  end
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(fields))
end
return #records
