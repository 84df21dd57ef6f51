-- ack: acknowledges finished jobs (removes them from the in-progress list,
-- clears the orphan counters of suspects, counts them as processed) in one step.
-- Cluster: builds orphan-counter keys (ack_jobs) from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
--
-- KEYS[1] = the process's in-progress list
-- KEYS[2] = stats:processed, KEYS[3] = stats:processed:<today>
-- ARGV[1] = orphan-counter key prefix, ARGV[2] = per-day stat TTL (s)
-- ARGV[3] = the acks' history groups, ARGV[4] = their tags ("", "": history
--   off; see includes/history.lua)
-- ARGV[5] = number of acks n; ARGV[6..5+n] = the finished jobs, as fetched
-- ARGV[6+n] = number of holds h, then h groups of 5 (ack position, prefix,
--   key, owner, ttl): what the finished jobs hold (a unique lock, a periodic
--   running lock, ...), released or kept with their acks as the ack rule of
--   each kind says (includes/holds.lua; ack_jobs' settle_acked_holds); the
--   batch members of one batch come as one group ("*p1,p2,..." positions)
-- then, last and only when some acked job carries one, the ends block: e, the
--   tracking prefix and e groups of 5 (includes/acked_ends.lua): the kept
--   results and final statuses of the acked jobs, written in this same step
-- Returns the 1-based positions of acks whose job was already gone.
-- (The variable list stays positional: the raw jobs must pass untouched.)
--- @include ack_jobs
--- @include history
--- @include acked_ends

local missing, count = ack_jobs(KEYS[1], ARGV[1], 6, true)
write_acked_ends(settle_acked_holds(6 + count, missing, true))
after_acked(ARGV[1], 6, count, missing)
-- Only what this call removed: an ack resent after a lost reply counts once.
count_processed(KEYS[2], KEYS[3], count - #missing, tonumber(ARGV[2]))
count_runs(ARGV[3], ARGV[4], missing)
return missing
