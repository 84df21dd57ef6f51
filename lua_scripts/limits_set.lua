-- limits_set: an operator's run-time limit for a key (`cogworker-async limits
-- set KEY LIMIT [--per SECONDS]`, `limits clear KEY`); it overrides what the
-- payloads say (includes/limits.lua, limit_of) from the next admission on.
--
-- KEYS[1] = the run-time limits (keys.limit_config, a hash: key -> "n" or
--   "n period_ms"), KEYS[2] = the due keys (keys.limit_due)
-- ARGV[1] = the limits prefix (keys.limits_prefix), ARGV[2] = the key
-- ARGV[3] = "set" or "clear"; ARGV[4] = (set) "n" or "n period_ms"
-- Returns 1 when something changed (clear: there was a limit or a pause to
--   clear), 0 when not; an error for a key outside the limits' names.
-- Clear also ends a pause (limits.BackOff) of the key. Either way the key's
-- held jobs are looked at by the next limits_due pass (due now), which lets in
-- as many as the new limit has room for. Atomic: the limit and the due mark
-- change together.

--- @include limits

local prefix, name = ARGV[1], ARGV[2]
if not is_held_key(prefix .. name, prefix) then
  return redis.error_reply("ERR limits_set: not a limit key")
end
local changed = 0
if ARGV[3] == "set" then
  redis.call("HSET", KEYS[1], name, ARGV[4])
  redis.call("SET", prefix .. "~used", "1")
  changed = 1
else
  changed = redis.call("HDEL", KEYS[1], name) + redis.call("DEL", prefix .. "~pause:" .. name)
end
if redis.call("LLEN", prefix .. "~parked:" .. name) > 0 then
  redis.call("ZADD", KEYS[2], now_ms(), name)
end
return changed > 0 and 1 or 0
