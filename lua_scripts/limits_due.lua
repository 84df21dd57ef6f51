-- limits_due: lets held jobs back in whose window limit has reopened (the
-- workers' "Limit timers" duty; includes/limits.lua parks them and records
-- when).
--
-- KEYS[1] = the due keys (keys.limit_due; the others are built from the
--   prefix, which starts with the namespace: with a hash-tagged namespace
--   they all share its slot)
-- ARGV[1] = the limits prefix (keys.limits_prefix)
-- ARGV[2] = the most keys to serve in one call
-- Returns the ms (Redis's clock) until the next due key, or -1 when none is
-- recorded.
-- Per due key: the window's log is trimmed and as many of the oldest held
-- jobs as it has room for go back to the tail of their queue (unpark);
-- if some are still held, the key is due again when its oldest start leaves
-- the window. Atomic: a job is held or queued, never both nor neither, and a
-- window never lets more jobs in than it has room for (their fetch checks
-- again anyway).

--- @include limits

local prefix, most = ARGV[1], tonumber(ARGV[2])
local due_key = KEYS[1]
local now = now_ms()
local due = redis.call("ZRANGEBYSCORE", due_key, "-inf", now, "LIMIT", 0, most)
for _, name in ipairs(due) do
  redis.call("ZREM", due_key, name)
  local spec = redis.call("HGET", prefix .. "~windows", name)
  local n, period_ms = nil, nil
  if spec then
    local a, b = string.match(spec, "^(%d+) (%d+)$")
    n, period_ms = tonumber(a), tonumber(b)
  end
  local parked = prefix .. "~parked:" .. name
  if n and period_ms and period_ms > 0 then
    local room = n
    local at = window_full(prefix, name, n, period_ms, now)
    if not at then
      room = n - redis.call("ZCARD", prefix .. "~window:" .. name)
    else
      room = 0
    end
    unpark(prefix, name, room)
    if redis.call("LLEN", parked) > 0 then
      local oldest = redis.call("ZRANGE", prefix .. "~window:" .. name, 0, 0, "WITHSCORES")
      local again = oldest[2] and tonumber(oldest[2]) + period_ms or now + period_ms
      redis.call("ZADD", due_key, again, name)
    else
      redis.call("HDEL", prefix .. "~windows", name)
    end
  else
    -- No record of its window (an operator cleared it): let one in, its
    -- fetch checks again.
    unpark_one(prefix, name)
  end
end
local next_due = redis.call("ZRANGE", due_key, 0, 0, "WITHSCORES")
if next_due[2] then
  return math.max(0, tonumber(next_due[2]) - now)
end
return -1
