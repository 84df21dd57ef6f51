-- swap_dead_entry: replaces one entry of the dead set with another, in one step
-- (two commands could leave both, and retrying each would run the job twice).
--
-- KEYS[1] = dead set
-- ARGV[1] = the entry to replace, ARGV[2] = score, ARGV[3] = its replacement
-- ARGV[4] = (optional) the kinds of hold a payload names (holds/encoding.py
--   kinds_table, JSON; includes/holds.lua), given when the swap completes a
--   ProcessDied burial: what the job holds (read from ARGV[1]) is settled as
--   the "burial" rule says (released), owner-checked, in the same step
-- Returns 1 when swapped, 0 when the entry was already gone.

--- @include holds

if not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  return 0
end
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[3])
redis.call("ZREM", KEYS[1], ARGV[1])
settle_payload_holds(ARGV[1], decode_kinds(ARGV[4]), "burial", true)
return 1
