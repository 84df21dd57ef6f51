-- bury: replaces an entry of the schedule or retry set that can't be run (not
-- a JSON job) with a dead entry that keeps its raw text, in one step.
--
-- KEYS[1] = the schedule or retry set, KEYS[2] = the dead set
-- KEYS[3] = stats:failed, KEYS[4] = stats:failed:<today>
-- ARGV[1] = the entry, ARGV[2] = its dead entry, ARGV[3] = now (epoch s)
-- ARGV[4] = per-day stat TTL (s)
-- Returns 1 when buried, 0 when the entry was already gone.

if not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[2])
redis.call("ZREM", KEYS[1], ARGV[1])
-- Stats are best effort: a corrupt counter must not fail a burial already made.
redis.pcall("INCR", KEYS[3])
redis.pcall("INCR", KEYS[4])
redis.pcall("EXPIRE", KEYS[4], tonumber(ARGV[4]))
return 1
