-- limits_due: lets held jobs back in whose limit has room again at a known
-- time: a window that reopened, a pause (limits.BackOff) that ended (the
-- workers' "Limit timers" duty; includes/limits.lua parks them and records
-- when).
--
-- KEYS[1] = the due keys (keys.limit_due; the others are built from the
--   prefix, which starts with the namespace: with a hash-tagged namespace
--   they all share its slot)
-- ARGV[1] = the limits prefix (keys.limits_prefix)
-- ARGV[2] = the most keys to serve, and jobs to let in per key with no
--   recorded limit, in one call
-- Returns the ms (Redis's clock) until the next due key, or -1 when none is
-- recorded.
-- Per due key: still paused: due again when the pause ends. Else as many of
-- its oldest held jobs as its limit (<prefix>~windows: "kind n period_ms",
-- or `limits set`'s) has room for go back to the tail of their queue (unpark): a window's free
-- starts, a concurrency limit's free slots (the slots' releases let the rest
-- in); no recorded limit: ARGV[2] of them. Jobs still held on a rate: due
-- again when it next has room. Atomic: a job is held or queued,
-- never both nor neither; its fetch checks every limit again.

--- @include limits

local prefix, most = ARGV[1], tonumber(ARGV[2])
local due_key = KEYS[1]
local windows = prefix .. "~windows"
local now = now_ms()
local due = redis.call("ZRANGEBYSCORE", due_key, "-inf", now, "LIMIT", 0, most)
for _, name in ipairs(due) do
  local paused = paused_for(prefix, name)
  if paused > 0 then
    redis.call("ZADD", due_key, now + paused, name)
  else
    redis.call("ZREM", due_key, name)
    local spec = redis.call("HGET", windows, name)
    local kind, n, period_ms = nil, nil, nil
    if spec then
      local a, b, c = string.match(spec, "^(%a+) (%d+) ([%d%.eE%+%-]+)$")
      kind, n, period_ms = a, tonumber(b), tonumber(c)
    end
    if n and (kind == "window" or kind == "concurrency") then
      n, period_ms = limit_of(prefix, name, n, period_ms)
    elseif n and (kind == "bucket" or kind == "points") then
      n = limit_of(prefix, name, n, 0)
    end
    local parked = prefix .. "~parked:" .. name
    local again = nil
    if kind == "window" and n and period_ms and period_ms > 0 then
      local room = 0
      if not window_full(prefix, name, n, period_ms, now) then
        room = n - redis.call("ZCARD", prefix .. "~window:" .. name)
      end
      unpark(prefix, name, room)
      if redis.call("LLEN", parked) > 0 then
        local oldest = redis.call("ZRANGE", prefix .. "~window:" .. name, 0, 0, "WITHSCORES")
        again = oldest[2] and tonumber(oldest[2]) + period_ms or now + period_ms
      end
    elseif kind == "concurrency" and n then
      unpark(prefix, name, n - redis.call("SCARD", prefix .. name))
    elseif kind == "bucket" and n and period_ms and period_ms > 0 then
      -- As many as it has whole tokens; the next due when one more is in.
      local tokens = bucket_tokens(prefix, name, n, period_ms, now)
      local room = math.floor(tokens)
      unpark(prefix, name, room)
      if redis.call("LLEN", parked) > 0 then
        again = now + math.ceil((1 - (tokens - room)) * period_ms)
      end
    elseif kind == "points" and n and period_ms and period_ms > 0 then
      -- The oldest held jobs whose costs the budget has now, in order; the
      -- next due when it has the next one's.
      local tokens = points_tokens(prefix, name, n, period_ms, now)
      while true do
        local job = redis.call("LINDEX", parked, -1)
        if not job then
          break
        end
        local cost = cost_of(job, name)
        if tokens < cost then
          again = now + math.ceil((cost - tokens) * period_ms)
          break
        end
        tokens = tokens - cost
        unpark(prefix, name, 1)
      end
    elseif kind == "leaky" and period_ms and period_ms > 0 then
      -- One start at a time: the next due one interval after it.
      local at = leaky_at(prefix, name)
      if not at or now >= at then
        unpark(prefix, name, 1)
        at = math.max(at or now, now) + period_ms
      end
      if redis.call("LLEN", parked) > 0 then
        again = math.ceil(at)
      end
    else
      unpark(prefix, name, most)
      if redis.call("LLEN", parked) > 0 then
        again = now
      end
    end
    if again then
      redis.call("ZADD", due_key, again, name)
    else
      redis.call("HDEL", windows, name)
    end
  end
end
local next_due = redis.call("ZRANGE", due_key, 0, 0, "WITHSCORES")
if next_due[2] then
  return math.max(0, tonumber(next_due[2]) - now)
end
return -1
