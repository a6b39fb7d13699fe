-- history_append: append a batch of execution records to the capped history stream.
-- The batch travels as one JSON argument: packing one short command is far
-- cheaper for the worker than one XADD (or nine arguments) per job.
-- KEYS[1] = djwork:history STREAM
-- ARGV[1] = approximate max length, ARGV[2] = JSON array of field names,
-- ARGV[3] = JSON array of records, each an array of string values in field-name order
-- Returns the number of records appended.
local names = cjson.decode(ARGV[2])
local records = cjson.decode(ARGV[3])
for _, record in ipairs(records) do
  local fields = {}
  for i, name in ipairs(names) do
    fields[#fields + 1] = name
    fields[#fields + 1] = record[i]
  end
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(fields))
end
return #records
