-- admit_taken: checks the limits of one job a blocking wait took (BLMOVE into
-- the in-progress list, or BRPOP in basic mode) before it runs, as fetch.lua
-- does for the jobs it takes (includes/limits.lua): admitted with its slots
-- taken, or parked on its first full limit and off the in-progress list.
--
-- KEYS[1] = the process's in-progress list
-- ARGV[1] = the job, as taken
-- ARGV[2] = the limits prefix (keys.limits_prefix)
-- ARGV[3] = "reliable" (the job is on KEYS[1]) or "basic" (popped)
-- An admission is counted for admitted/s (includes/limits.lua flush_admitted).
-- Returns 1: admitted, run it; 0: parked, not to run; 2: no longer on the
--   in-progress list (recovery requeued it meanwhile): not to run, and no
--   slot taken for it.
-- Atomic: the check, the slot and the move off the list are one step, so a
-- limit is never over-admitted between two processes, and a parked job is on
-- exactly one list.

--- @include limits

local job, reliable = ARGV[1], ARGV[3] == "reliable"
if reliable and not redis.call("LPOS", KEYS[1], job) then
  return 2
end
if admit_job(job, ARGV[2]) then
  flush_slots()
  flush_admitted(ARGV[2])
  return 1
end
if reliable then
  redis.call("LREM", KEYS[1], 1, job)
end
return 0
