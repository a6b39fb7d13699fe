-- batch_release: a hold leaves its batch (a chord header fed by a generator: every member is in, or the
-- generator failed), counted as a job's end is, so the batch's events fire as they would for a member.
-- The rules and the once-only claims are lua/batch_lib.lua's; membership makes a second release count nothing.
-- KEYS[1] = b-<bid> HASH. ARGV[1] = the hold (a pending member no job ends), ARGV[2] = ok or died. Returns 1.
--@include batch_lib
batch_end(batch_bid(KEYS[1]), ARGV[1], ARGV[2], '')  -- '': no task ended (a chord body's parent_id)
return 1
