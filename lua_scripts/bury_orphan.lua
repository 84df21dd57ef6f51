-- bury_orphan: files the head of the repeat-orphans list in dead, in one step.
--
-- KEYS[1] = repeat_orphans list, KEYS[2] = dead set
-- KEYS[3] = stats:failed, KEYS[4] = stats:failed:<today>, KEYS[5] = its orphan counter
-- ARGV[1] = the parked job (expected at the head), ARGV[2] = score (epoch s)
-- ARGV[3] = its dead entry (with the ProcessDied error), ARGV[4] = per-day stat TTL
-- ARGV[5] = (optional) the periodic running-lock prefix: the job of an
--   overlap=False entry releases its running lock (owner-checked) as it is buried
-- ARGV[6], ARGV[7] (optional) = its unique-job lock key and jid: released,
--   owner-checked, in the same step (a ProcessDied burial is terminal)
-- Returns 1 when moved, 0 when the head is another job (someone else moved it).
-- Head only (the caller walks the list in order): written before removed.
--- @include running_lock

--- @include release_unique

if redis.call("LINDEX", KEYS[1], 0) ~= ARGV[1] then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
redis.call("LPOP", KEYS[1])
redis.pcall("INCR", KEYS[3])
redis.pcall("INCR", KEYS[4])
redis.pcall("EXPIRE", KEYS[4], tonumber(ARGV[4]))
redis.pcall("DEL", KEYS[5])
release_for(ARGV[1], ARGV[5])
if ARGV[6] and ARGV[6] ~= "" then
  pcall(release_unique, ARGV[6], ARGV[7])
end
return 1
