-- Rate and concurrency limits, checked where a job is taken (fetch.lua,
-- admit_taken.lua), in the same atomic step as the take: a job that names
-- limits runs only while every one of them has room; else it is parked, in
-- order, on the first full limit's list and never counts a retry.
--
-- A payload names its limits as "limits": [[kind, name, n, ...], ...]
-- (cogworker_async/limits): kind "concurrency": at most n jobs hold a slot in
-- the set <prefix><name> at once (the hold "limit_slot", holds/declarations.py: released by
-- every settling step, includes/holds.lua, which unparks the oldest parked
-- job of the key); kind "window" [.., n, period s]: at most n starts in any
-- period (a sliding log); kind "bucket" [.., capacity, per_second]: a token
-- bucket; kind "leaky" [.., rate, per_seconds]: a smooth rate (GCRA without
-- burst). A job held on a rate is let back in by limits_due.lua (the workers'
-- "Limit timers" duty) when its key has room again. <prefix>~config (a hash: name -> n), written by
-- `cogworker-async limits set`, overrides a payload's n. Parked jobs wait on
-- the list <prefix>~parked:<name>, the newest at the head.
--
-- A plain job pays one substring search ('"limits"'); a payload that is no
-- JSON object, or names no list of limits, is taken as a plain job.

--- @include holds

-- limit_of(prefix, name, n, period_ms): the limit in force for `name`: the
-- run-time one (`limits set`: <prefix>~config, name -> "n" or "n period_ms"),
-- else the payload's. Returns n and the period (ms; a window's).
local function limit_of(prefix, name, n, period_ms)
  local set = redis.call("HGET", prefix .. "~config", name)
  if set then
    local a, b = string.match(set, "^(%d+) ?(%d*)$")
    if a then
      return tonumber(a), tonumber(b) or period_ms
    end
  end
  return n, period_ms
end

-- now_ms(): Redis's clock, in ms (one clock for every process).
local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- window_full(prefix, name, n, period_ms, now): kind "window": at most n starts
-- in any period_ms, a sliding log (the sorted set <prefix>~window:<name>,
-- member: a start, score: its ms). Returns the ms at which a start is next
-- allowed when full, else nil.
local function window_full(prefix, name, n, period_ms, now)
  local log = prefix .. "~window:" .. name
  redis.call("ZREMRANGEBYSCORE", log, "-inf", now - period_ms)
  if redis.call("ZCARD", log) < n then
    return nil
  end
  local oldest = redis.call("ZRANGE", log, 0, 0, "WITHSCORES")
  return tonumber(oldest[2]) + period_ms
end

-- park(prefix, name, job, due_ms, spec, first): the job waits on the key's
-- list (the newest at the head; `first`: at the tail, the next let in: a job
-- that had started, backed off). A due time (a window reopening, a pause
-- ending) is kept in <prefix>~due (name -> the earliest ms), with the limit's
-- spec ("kind n period_ms") in <prefix>~windows, for limits_due.lua.
local function park(prefix, name, job, due_ms, spec, first)
  -- The job's own write last: a bookkeeping key of the wrong type fails the
  -- call before the job is parked (admit_job then takes it as a plain job),
  -- never after (it would be both parked and run).
  if due_ms then
    local due_key = prefix .. "~due"
    local at = tonumber(redis.call("ZSCORE", due_key, name))
    if not at or due_ms < at then
      redis.call("ZADD", due_key, due_ms, name)
    end
    if spec then
      redis.call("HSET", prefix .. "~windows", name, spec)
    end
  end
  redis.call(first and "RPUSH" or "LPUSH", prefix .. "~parked:" .. name, job)
end

-- paused_for(prefix, name): the ms left of a pause of key `name`
-- (limits.BackOff: <prefix>~pause:<name>), 0 when it is not paused.
local function paused_for(prefix, name)
  local left = tonumber(redis.call("PTTL", prefix .. "~pause:" .. name))
  return left > 0 and left or 0
end

-- spec_of(kind, n, x): a limit as limits_due.lua reads it, "kind n x": x is
-- a window's period (ms), a bucket's or a leaky bucket's interval between two
-- tokens (ms), 0 for concurrency; nil for a kind it does not know.
local function spec_of(kind, n, x)
  if kind == "concurrency" or kind == "window" or kind == "bucket" or kind == "leaky"
      or kind == "points" then
    return kind .. " " .. n .. " " .. string.format("%.17g", x or 0)
  end
  return nil
end

-- bucket_tokens(prefix, name, cap, interval_ms, now): kind "bucket": a token
-- bucket of `cap` tokens, one more every interval_ms (the hash
-- <prefix>~bucket:<name>: t = tokens, at = ms of the last take; full when
-- absent). The tokens now (a float).
local function tokens_at(key, cap, interval_ms, now)
  local state = redis.call("HMGET", key, "t", "at")
  local t, at = tonumber(state[1]), tonumber(state[2])
  if not t or not at then
    return cap
  end
  return math.min(cap, t + math.max(0, now - at) / interval_ms)
end

local function bucket_tokens(prefix, name, cap, interval_ms, now)
  return tokens_at(prefix .. "~bucket:" .. name, cap, interval_ms, now)
end

-- points_tokens(prefix, name, cap, interval_ms, now): kind "points" [.., points,
-- per_seconds, cost]: a bucket of `points` (<prefix>~points:<name>, as a
-- token bucket's, but a start takes its cost and a settlement gives back or
-- takes more: it may go below 0).
local function points_tokens(prefix, name, cap, interval_ms, now)
  return tokens_at(prefix .. "~points:" .. name, cap, interval_ms, now)
end

-- cost_of(job, name): the cost a raw job's points limit `name` names (1 if none).
local function cost_of(job, name)
  local ok, decoded = pcall(cjson.decode, job)
  if ok and type(decoded) == "table" and type(decoded["limits"]) == "table" then
    for _, limit in ipairs(decoded["limits"]) do
      if type(limit) == "table" and limit[1] == "points" and limit[2] == name then
        return tonumber(limit[5]) or 1
      end
    end
  end
  return 1
end

-- leaky_at(prefix, name): kind "leaky" (GCRA, no burst): the ms at which the
-- next start is allowed (<prefix>~leaky:<name>, the theoretical arrival
-- time); nil when any start is.
local function leaky_at(prefix, name)
  return tonumber(redis.call("GET", prefix .. "~leaky:" .. name))
end

-- Admissions per limit key (`limits list`, the Limits page, the scrape show
-- admitted/s): check_job counts them here, per call; flush_admitted (once, at
-- the end of a script that admits: fetch.lua, admit_taken.lua) adds them to
-- the hash <prefix>~admitted:<10 s bucket of Redis's clock> (name ->
-- admissions; kept 30 s), one HINCRBY per key a call, not per job.
local admitted = nil

local function count_admitted(names)
  admitted = admitted or {}
  for _, name in ipairs(names) do
    admitted[name] = (admitted[name] or 0) + 1
  end
end

-- flush_admitted(prefix): redis.pcall: a key of the wrong type never fails
-- the step that admitted the jobs.
local function flush_admitted(prefix)
  if not admitted then
    return
  end
  local bucket = prefix .. "~admitted:" .. math.floor(now_ms() / 10000)
  local fresh = false
  local names = {}
  for name in pairs(admitted) do
    names[#names + 1] = name
  end
  if #names <= 2 or #names > 1000 then
    for _, name in ipairs(names) do
      fresh = redis.pcall("HINCRBY", bucket, name, admitted[name]) == admitted[name] or fresh
    end
  else
    -- Many keys (a per-key limit: each job of a call its own): one HMGET and
    -- one HSET, not an HINCRBY a key (atomic all the same: one script).
    local had = redis.pcall("HMGET", bucket, unpack(names))
    if type(had) == "table" and not had.err then
      local sums = {}
      for i, name in ipairs(names) do
        fresh = fresh or not had[i]
        sums[#sums + 1] = name
        sums[#sums + 1] = (tonumber(had[i]) or 0) + admitted[name]
      end
      redis.pcall("HSET", bucket, unpack(sums))
    end
  end
  if fresh then
    redis.pcall("PEXPIRE", bucket, 30000)
  end
  admitted = nil
end

-- One script call reads a key's run-time limit and pause once (check_job's
-- own: no script that admits jobs changes them in the same call), and asks
-- first, once a call, whether any key has a run-time limit (<prefix>~config
-- exists) or a pause (any_paused, includes/holds.lua): with none, a job pays
-- no command for either.
local config_seen, pause_seen, config_any = {}, {}, nil

local function limit_of_once(prefix, name, n, period_ms)
  if config_any == nil then
    config_any = redis.call("EXISTS", prefix .. "~config") == 1
  end
  if not config_any then
    return n, period_ms
  end
  local set = config_seen[name]
  if set == nil then
    set = redis.call("HGET", prefix .. "~config", name) or false
    config_seen[name] = set
  end
  if set then
    local a, b = string.match(set, "^(%d+) ?(%d*)$")
    if a then
      return tonumber(a), tonumber(b) or period_ms
    end
  end
  return n, period_ms
end

local function paused_for_once(prefix, name)
  if not any_paused(prefix) then
    return 0
  end
  local left = pause_seen[name]
  if left == nil then
    left = paused_for(prefix, name)
    pause_seen[name] = left
  end
  return left
end

local NONE = {} -- an empty list, for loops over an optional one (none made each time)

-- A concurrency key's slots, counted once a call: running[key] is its SCARD
-- at the call's first look plus the jobs this call admitted to it since;
-- joining[key] lists those jobs' jids not yet added, added by one SADD a key
-- (flush_slots) before the jobs are written as taken. A job counted twice (a
-- requeued one whose jid was still a member, a payload met twice) only counts
-- high: a key is never over-admitted, at worst a job waits one call more.
local running, joining = {}, {}

-- joining_has(key, jid): jid is among the key's slots this call has not added
-- yet (looked at only on a full key: a short scan).
local function joining_has(key, jid)
  for _, other in ipairs(joining[key] or NONE) do
    if other == jid then
      return true
    end
  end
  return false
end

-- flush_slots(): the slots this call admitted, added to their sets, one SADD
-- a key (chunks of 1,000 jids: unpack's bound). Called before the jobs are
-- written to in-progress (fetch.lua, admit_taken.lua), so a script stopped
-- between the two has slots without jobs (released by recovery's check),
-- never jobs running without slots. redis.pcall: the jobs other limits
-- parked are already on their held lists, so an error here (a set SCARD
-- could read but SADD not write) must not stop the call before their queue
-- is trimmed; the jobs then run as plain ones, as admit_job's own pcall does.
local function flush_slots()
  for key, jids in pairs(joining) do
    for i = 1, #jids, 1000 do
      redis.pcall("SADD", key, unpack(jids, i, math.min(i + 999, #jids)))
    end
  end
  joining = {}
end

-- header_of(job): a payload that starts with its limits (payload.encode_job
-- writes "limits" first, then "jid"): the limits and the jid, read without
-- decoding the whole payload; nil for any other (check_job decodes it). The
-- list ends where the brackets balance; cjson.decode of that slice succeeds
-- only when it is the whole value (a bracket inside a name cuts it short
-- into no JSON), so a slice that decodes is the top-level "limits".
-- A call's jobs often name the same limits (a global one, a hot key): each
-- slice is decoded once a call (heads: slice -> limits, false for no JSON).
-- The last head that decoded (last_slice, last_limits): a job whose text at
-- 11 starts with it has that very head (a complete JSON value is no prefix
-- of a longer one), found without a pattern or a new string.
local heads, last_slice, last_limits = {}, nil, nil

local function header_of(job)
  if string.find(job, '{"limits":', 1, true) ~= 1 then
    return nil
  end
  local limits, after = nil, nil
  if last_slice and string.find(job, last_slice, 11, true) == 11 then
    limits, after = last_limits, 11 + #last_slice
  else
    after = string.match(job, "^%b[]()", 11)
    if not after then
      return nil
    end
    local slice = string.sub(job, 11, after - 1)
    limits = heads[slice]
    if limits == nil then
      local ok, decoded = pcall(cjson.decode, slice)
      limits = ok and type(decoded) == "table" and decoded or false
      heads[slice] = limits
    end
    if not limits then
      return nil
    end
    last_slice, last_limits = slice, limits
  end
  local jid = string.match(job, '^,"jid":"([^"\\]+)"', after)
  if not jid then
    return nil
  end
  return limits, jid
end

-- check_job(job, prefix): admits or parks the raw `job`: every limit it names
-- is checked first, then (all have room) each takes its share; else the job
-- is parked on the first full (or paused) one. Returns true when it may run,
-- false when it was parked.
local function check_job(job, prefix)
  local limits, jid = header_of(job)
  if not limits then
    local decoded = cjson.decode(job)
    limits, jid = decoded["limits"], decoded["jid"]
  end
  if type(limits) ~= "table" or type(jid) ~= "string" or jid == "" then
    return true
  end
  -- starts and takes (the rates' writes) are made only when a rate is named.
  local slots, starts, takes, now, names = {}, nil, nil, nil, {}
  for _, limit in ipairs(limits) do
    local kind, name, n = limit[1], limit[2], tonumber(limit[3])
    -- is_held_key(prefix .. name, prefix), without building the key: a name
    -- that is no bookkeeping key ("~...").
    if type(name) == "string" and n and name ~= "" and string.byte(name, 1) ~= 126 then
      names[#names + 1] = name
      local period_ms = math.floor((tonumber(limit[4]) or 0) * 1000)
      n, period_ms = limit_of_once(prefix, name, n, period_ms)
      local paused = paused_for_once(prefix, name)
      if paused > 0 then
        now = now or now_ms()
        park(prefix, name, job, now + paused, spec_of(kind, n, period_ms))
        return false
      end
      if kind == "concurrency" then
        local key = prefix .. name
        local count = running[key]
        if count == nil then
          count = redis.call("SCARD", key)
          running[key] = count
        end
        -- Already a member: a job taken again (a requeue that found it running
        -- on) holds its slot once. Asked only of a full key.
        if count >= n and not joining_has(key, jid)
            and redis.call("SISMEMBER", key, jid) == 0 then
          park(prefix, name, job)
          return false
        end
        if slots[#slots] ~= key then -- a key named twice in a row holds one slot
          slots[#slots + 1] = key
        end
      elseif kind == "window" then
        if period_ms > 0 then
          now = now or now_ms()
          local due = window_full(prefix, name, n, period_ms, now)
          if due then
            park(prefix, name, job, due, spec_of(kind, n, period_ms))
            return false
          end
          starts = starts or {}
          starts[#starts + 1] = {prefix .. "~window:" .. name, period_ms}
        end
      elseif kind == "bucket" then
        -- [.., capacity, per_second]: its interval is 1000 / per_second ms.
        local per_second = tonumber(limit[4]) or 0
        if per_second > 0 then
          local interval = 1000 / per_second
          now = now or now_ms()
          local tokens = bucket_tokens(prefix, name, n, interval, now)
          if tokens < 1 then
            park(prefix, name, job, now + math.ceil((1 - tokens) * interval),
              spec_of(kind, n, interval))
            return false
          end
          takes = takes or {}
          takes[#takes + 1] = {
            prefix .. "~bucket:" .. name, tokens - 1, math.ceil(n * interval) + 1000}
        end
      elseif kind == "points" then
        local cost = tonumber(limit[5]) or 1
        if period_ms > 0 and cost > 0 then
          local interval = period_ms / n
          now = now or now_ms()
          local tokens = points_tokens(prefix, name, n, interval, now)
          if tokens < cost then
            park(prefix, name, job, now + math.ceil((cost - tokens) * interval),
              spec_of(kind, n, interval))
            return false
          end
          takes = takes or {}
          takes[#takes + 1] = {prefix .. "~points:" .. name, tokens - cost,
            math.ceil((n - tokens + cost) * interval) + 1000}
        end
      elseif kind == "leaky" then
        -- [.., rate, per_seconds]: one start every per_seconds * 1000 / rate ms.
        if period_ms > 0 then
          local interval = period_ms / n
          now = now or now_ms()
          local at = leaky_at(prefix, name)
          if at and now < at then
            park(prefix, name, job, at, spec_of(kind, n, interval))
            return false
          end
          takes = takes or {}
          takes[#takes + 1] = {"leaky", name, math.max(at or now, now) + interval, interval}
          takes[#takes].leaky = true
        end
      end
    end
  end
  for _, key in ipairs(slots) do
    running[key] = running[key] + 1
    local jids = joining[key]
    if jids then
      jids[#jids + 1] = jid
    else
      joining[key] = {jid}
    end
  end
  for _, start in ipairs(starts or NONE) do
    redis.call("ZADD", start[1], now, jid .. ":" .. now)
    redis.call("PEXPIRE", start[1], start[2])
  end
  for _, take in ipairs(takes or NONE) do
    if not take.leaky then
      redis.call("HSET", take[1], "t", string.format("%.6f", take[2]), "at", now)
      redis.call("PEXPIRE", take[1], take[3])
    else
      redis.call("SET", prefix .. "~leaky:" .. take[2], string.format("%.3f", take[3]),
        "PX", math.ceil(take[3] - now + take[4]))
    end
  end
  count_admitted(names)
  return true
end

-- admit_job(job, prefix): check_job for a job that names limits (prefix ""
-- checks none). pcall: a key of the wrong type (not a limit's) never fails
-- the take around it: the job runs as a plain one.
local function admit_job(job, prefix)
  if prefix == nil or prefix == "" or not string.find(job, '"limits"', 1, true) then
    return true
  end
  local ok, admitted = pcall(check_job, job, prefix)
  return (not ok) or admitted
end
