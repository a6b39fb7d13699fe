-- job_lib: reading a job's raw payload inside a script. A library: djwork/scripts.py puts this text where
-- a script has the line `--@include job_lib`. KEYS and ARGV: none of its own. Returns nothing.

-- The jid and the decoded job of a raw payload, or nil, nil: a payload that is not a JSON object with a
-- string jid (malformed, or written by something else) is passed over, never a reason to fail the step.
local function job_decode(payload)
  local ok, job = pcall(cjson.decode, payload)
  if ok and type(job) == 'table' and type(job['jid']) == 'string' then return job['jid'], job end
  return nil, nil
end
