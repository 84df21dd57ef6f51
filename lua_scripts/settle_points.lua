-- settle_points: a handler's `await limits.settle(key, real)`: the difference
-- between the cost its job took to start (its estimate) and the real one goes
-- back to the points limit's budget (or is taken from it: it may go below 0,
-- and the next jobs wait the longer).
--
-- KEYS[1] = the due keys (keys.limit_due)
-- ARGV[1] = the limits prefix (keys.limits_prefix), ARGV[2] = the key
-- ARGV[3] = estimate - real (points; > 0 gives back), ARGV[4] = the points
-- (the budget's size), ARGV[5] = ms between two points of refill
-- Returns the budget's points afterwards (a string), an error for a key
--   outside the limits' names or numbers that are none.
-- Atomic: the refill, the settlement and the due mark are one step; a
-- settlement that gives back makes the key's held jobs due now (limits_due).

--- @include limits

local prefix, name = ARGV[1], ARGV[2]
local delta, cap, interval = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not is_held_key(prefix .. name, prefix) or not delta or not cap or cap <= 0
    or not interval or interval <= 0 then
  return redis.error_reply("ERR settle_points: a limit key and numbers")
end
local now = now_ms()
local key = prefix .. "~points:" .. name
local tokens = math.min(cap, points_tokens(prefix, name, cap, interval, now) + delta)
redis.call("HSET", key, "t", string.format("%.6f", tokens), "at", now)
redis.call("PEXPIRE", key, math.ceil((cap - tokens) * interval) + 1000)
if delta > 0 and redis.call("LLEN", prefix .. "~parked:" .. name) > 0 then
  redis.call("ZADD", KEYS[1], now, name)
end
return string.format("%.6f", tokens)
