-- batch_check: decide a batch's events now (an empty batch, just made: nothing will end in it).
-- The rules and the once-only claims are lua/batch_lib.lua's.
-- KEYS[1] = b-<bid> HASH. ARGV: none. Returns 1.
--@include batch_lib
batch_check(batch_bid(KEYS[1]))
return 1
