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
-- ARGV[6+n] = number of lock releases r, then r triples (ack position, lock
--   key, jid): the unique lock or periodic running lock a finished job holds,
--   released with its ack (see ack_jobs' release_acked)
-- Returns the 1-based positions of acks whose job was already gone.
-- (The variable list stays positional: the raw jobs must pass untouched.)
--- @include ack_jobs
--- @include history

local missing, count = ack_jobs(KEYS[1], ARGV[1], 6, true)
release_acked(6 + count, missing, true)
-- Only what this call removed: an ack resent after a lost reply counts once.
count_processed(KEYS[2], KEYS[3], count - #missing, tonumber(ARGV[2]))
count_runs(ARGV[3], ARGV[4], missing)
return missing
