-- swap_dead_entry: replaces one entry of the dead set with another, in one step
-- (two commands could leave both, and retrying each would run the job twice).
--
-- KEYS[1] = dead set
-- ARGV[1] = the entry to replace, ARGV[2] = score, ARGV[3] = its replacement
-- ARGV[4], ARGV[5] (optional) = the job's unique lock key and jid: released,
--   owner-checked, in the same step (recovery completing a ProcessDied burial)
-- Returns 1 when swapped, 0 when the entry was already gone.

--- @include release_unique

if not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  return 0
end
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[3])
redis.call("ZREM", KEYS[1], ARGV[1])
if ARGV[4] then
  release_unique(ARGV[4], ARGV[5])
end
return 1
