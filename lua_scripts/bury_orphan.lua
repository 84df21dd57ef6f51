-- bury_orphan: files the head of the repeat-orphans list in dead, in one step.
--
-- KEYS[1] = repeat_orphans list, KEYS[2] = dead set
-- KEYS[3] = stats:failed, KEYS[4] = stats:failed:<today>, KEYS[5] = its orphan counter
-- ARGV[1] = the parked job (expected at the head), ARGV[2] = score (epoch s)
-- ARGV[3] = its dead entry (with the ProcessDied error), ARGV[4] = per-day stat TTL
-- ARGV[5] = (optional; "" for none) the kinds of hold a payload names
--   (holds/encoding.py kinds_table, JSON; includes/holds.lua): what the job holds (its
--   unique lock, its overlap=False entry's running lock, ...) is settled as
--   the "burial" rule says, owner-checked, in the same step (a ProcessDied
--   burial is terminal: released)
-- ARGV[6] (optional) = the tracking prefix (keys.tracking_prefix): a tracked
--   job's status says dead and its result waiters hear the ProcessDied error
--   (includes/job_end.lua), in the same step
-- Returns 1 when moved, 0 when the head is another job (someone else moved it).
-- Head only (the caller walks the list in order): written before removed.
--- @include holds
--- @include job_end

if redis.call("LINDEX", KEYS[1], 0) ~= ARGV[1] then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
redis.call("LPOP", KEYS[1])
redis.pcall("INCR", KEYS[3])
redis.pcall("INCR", KEYS[4])
redis.pcall("EXPIRE", KEYS[4], tonumber(ARGV[4]))
redis.pcall("DEL", KEYS[5])
settle_payload_holds(ARGV[1], decode_kinds(ARGV[5]), "burial", true)
if ARGV[6] and ARGV[6] ~= "" then
  local error_class, error_message = end_fields(ARGV[3], "ProcessDied", "its process died")
  pcall(record_end, ARGV[1], ARGV[6], "dead", error_class, error_message, ARGV[2])
end
return 1
