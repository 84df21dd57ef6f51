-- fetch: acknowledges a batch of finished jobs and moves up to n new ones from
-- the queues into the in-progress list, in one atomic call.
-- Cluster: builds orphan-counter keys (ack_jobs, real_suspect) and wake-up markers from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
--
-- One call serves every processor of a process that settled or went idle at
-- the same moment: that is what lets one process run tens of thousands of
-- jobs a second (the cost is per round trip, not per job).
--
-- KEYS[1] = the process's in-progress list
-- KEYS[2] = the paused-queues set
-- KEYS[3] = stats:processed, KEYS[4] = stats:processed:<today>
-- KEYS[5..] = queue keys, in the order to try (shuffled by weight by the caller)
-- ARGV[1] = "reliable" (moved into in-progress) or "basic" (popped: at most once)
-- ARGV[2] = n, the most jobs to take
-- ARGV[3] = orphan-counter key prefix, ARGV[4] = wake-up marker key prefix
-- ARGV[5] = per-day stat TTL (s)
-- ARGV[6] = "1" when a suspect may be taken, "0" when the caller declines them
--   (it just gave one back: it could not get the process to itself in time)
-- ARGV[7] = the acks' history groups, ARGV[8] = their tags ("", "": history
--   off; see includes/history.lua)
-- ARGV[9] = number of acks a; ARGV[10..9+a] = the finished jobs, as fetched
-- ARGV[10+a] = number of holds h, then h groups of 5 (ack position, prefix,
--   key, owner, ttl): what the finished jobs hold, released or kept with
--   their acks (includes/holds.lua; ack_jobs' settle_acked_holds)
-- then the queue names matching KEYS[5..]
-- then the unique lock prefix (keys.unique(""); "" renews nothing) and the
--   default unique_for (ms) of a payload that names none (renew_taken_locks)
-- then the limits prefix (keys.limits_prefix; "" checks none): a job that
--   names limits is admitted only while each has room, else parked on the
--   first full one's list instead of taken (includes/limits.lua, admit_job);
--   only when <prefix>~used exists (keys.limits_used): a namespace without
--   limits pays one EXISTS a call, nothing a job; the admissions are counted
--   per key once a call (flush_admitted: admitted/s), and a concurrency
--   key's slots are counted once a call and added in one SADD a key before
--   the jobs are written to in-progress (flush_slots). With <prefix>~fair too
--   (keys.fair_used), each queue's fair jobs are moved onto their key's line
--   and taken by turns after its plain jobs (includes/fair.lua)
-- then, last and only when some acked job carries one, the ends block: e, the
--   tracking prefix and e groups of 5 (includes/acked_ends.lua): the kept
--   results and final statuses of acked jobs, written in this same step
-- Returns {jobs taken (raw, in the order taken), positions of acks whose job
-- was already gone, names of queues skipped because their key has the wrong type,
-- sources: a queue name and how many of the jobs taken came from it, in the
-- order taken (the caller knows each job's queue; a payload may name another),
-- renewals: per taken until_executed unique job, its position, its jid and the
-- jid holding its lock afterwards (false: the key is not a string),
-- end failures: the status key and error of each end or "working" write that
-- failed (acked_ends)}.
-- Atomic: a job is on its queue, on the in-progress list, (held back by a
-- limit) parked on its limit's list, or (fair) on its key's line: never
-- none, never two.
--
-- Suspects (jobs requeue.lua marked after orphaning them more than once) run
-- alone: one is taken only as the first job of a call that accepts them, and
-- the call then ends. A suspect met later, or in a call that declines them,
-- is left where it is at the front of its queue and that queue is skipped —
-- the other queues are still served, in strict order too. A mark counts only
-- beside the job's orphan counter >= 1 (real_suspect): a producer can write
-- the text, not the counter, so a forged mark is cut off and the job taken as
-- a plain one. Only a job whose third byte is "s" is looked at twice.
--- @include ack_jobs
--- @include history
--- @include acked_ends
--- @include limits
--- @include fair

-- The most fair jobs one call moves from a queue onto their lines.
local FAIR_SCAN = 1000

local missing, acked = ack_jobs(KEYS[1], ARGV[3], 10, ARGV[1] == "reliable")
local names_at = settle_acked_holds(10 + acked, missing, ARGV[1] == "reliable")
after_acked(ARGV[3], 10, acked, missing)
local unique_prefix = ARGV[names_at + #KEYS - 4]
local unique_default_ms = tonumber(ARGV[names_at + #KEYS - 3])
local limits_prefix = ARGV[names_at + #KEYS - 2]
-- Limits are checked only in a namespace that has them (<prefix>~used, set
-- before the first limited job is written): read once, at the first job met
-- (inline below: a plain job pays two tests, not a call).
local limits_on = nil
local function limits_used()
  return limits_prefix ~= nil and limits_prefix ~= ""
    and redis.call("EXISTS", limits_prefix .. "~used") == 1
end
-- Fair keys are served only where they are used (<prefix>~fair): read once
-- a call, with the limits flag (so a fetch of empty queues pays it too).
local fair_on = nil
local function fair_used()
  if limits_on == nil then
    limits_on = limits_used()
  end
  return limits_on and redis.call("EXISTS", limits_prefix .. "~fair") == 1
end
local end_failures = write_acked_ends(names_at + #KEYS - 1)
-- Only what this call removed: an ack resent after a lost reply counts once.
count_processed(KEYS[3], KEYS[4], acked - #missing, tonumber(ARGV[5]))
count_runs(ARGV[7], ARGV[8], missing)

local reliable = ARGV[1] == "reliable"
local wanted = tonumber(ARGV[2])
local suspects_ok = ARGV[6] == "1"
local counter_prefix = ARGV[3]
local taken, broken, sources = {}, {}, {}
local alone = false -- a suspect was taken: nothing else goes with it
for i = 5, #KEYS do
  if wanted <= #taken or alone then
    break
  end
  local name = ARGV[names_at + i - 5]
  if redis.call("SISMEMBER", KEYS[2], name) == 0 then
    if fair_on == nil then
      fair_on = fair_used()
    end
    -- base: this queue's fair keys (nil: none); fed: the job fed back onto
    -- the queue for a blocking wait (taken, not put back in line).
    local base, fed = nil, nil
    if fair_on then
      local ok, got = pcall(redis.call, "HGET", limits_prefix .. "~fair:" .. name, "~fed")
      if ok then
        base, fed = limits_prefix .. "~fair:" .. name, got
        fair_scan(base, KEYS[i], FAIR_SCAN, fed)
      end
    end
    -- A batch from the tail (where jobs are taken from) in three commands,
    -- not one LMOVE per job: the per-command cost inside a script is most of
    -- what a fetch costs Redis. pcall: a queue key of the wrong type is
    -- skipped and reported, never allowed to abort the call after other
    -- queues' jobs were moved.
    local ok, batch = pcall(redis.call, "LRANGE", KEYS[i], -(wanted - #taken), -1)
    if not ok then
      broken[#broken + 1] = name
    else
      local first = #taken + 1
      local consumed = 0 -- off this queue: taken or parked by a limit
      local skipped = false -- a suspect left at this queue's front
      for j = #batch, 1, -1 do
        local job = batch[j]
        if is_suspect(job) then
          local real
          real, job = real_suspect(job, counter_prefix)
          if real then
            if #taken == 0 and suspects_ok then
              consumed = consumed + 1
              if limits_on == nil then
                limits_on = limits_used()
              end
              if not limits_on or admit_job(job, limits_prefix) then
                taken[1] = job
                alone = true
              end
            else
              skipped = true
            end
            break
          end
        end
        consumed = consumed + 1
        if limits_on == nil then
          limits_on = limits_used()
        end
        local key, weight = nil, nil
        if base and job ~= fed then
          key, weight = fair_of(job)
        end
        if key and pcall(fair_line, base, job, key, weight) then
          -- onto its key's line: taken in its turn, below
        elseif not limits_on or admit_job(job, limits_prefix) then
          taken[#taken + 1] = job
        end
      end
      local moved = #taken - first + 1
      if consumed > 0 then
        -- Written before removed: a script stopped between the two keeps the
        -- jobs on both lists (a stray, requeued later), never on neither.
        -- LPUSH of the jobs in the order taken leaves the list as that many
        -- LMOVE RIGHT LEFT would: the newest fetch at the head. The jobs a
        -- limit parked left the queue too, onto their limit's list.
        flush_slots()
        if reliable and moved > 0 then
          redis.call("LPUSH", KEYS[1], unpack(taken, first, #taken))
        end
        redis.call("LTRIM", KEYS[i], 0, -(consumed + 1))
      end
      if base and #taken < wanted and not alone then
        -- The keys' turns, after the plain jobs: written to in-progress, then
        -- trimmed off their lines, even if a key of the wrong type stopped
        -- the turns part way (pcall).
        local start, pending = #taken + 1, {}
        pcall(fair_serve, base, wanted - #taken, limits_prefix, taken, pending)
        flush_slots()
        if reliable and #taken >= start then
          redis.call("LPUSH", KEYS[1], unpack(taken, start, #taken))
        end
        for key, n in pairs(pending) do
          redis.call("LTRIM", base .. ":" .. key, 0, -(n + 1))
        end
        moved = #taken - first + 1
      end
      local fed_now = false
      if base then
        -- Lines still waiting and nothing on the list: a process idle on the
        -- list is woken by the next turn's job (the wake-up below for others).
        local ok, fed_one = pcall(fair_feed, base, KEYS[i])
        fed_now = ok and fed_one
      end
      if moved > 0 then
        sources[#sources + 1] = name
        sources[#sources + 1] = moved
      end
      -- Filled up with work still waiting, or a suspect left for a process
      -- with nothing else to run, or jobs held by a limit that may have hidden
      -- runnable ones behind them: wake an idle process (maybe this one) for
      -- it. Not when this caller declines suspects: it would only wake
      -- itself, in a loop.
      if (#taken >= wanted or alone or (skipped and suspects_ok) or consumed > moved or fed_now)
          and redis.call("LLEN", KEYS[i]) > 0 then
        redis.pcall("ZADD", ARGV[4] .. name, 0, "1")
      end
    end
  end
end
-- renew_taken_locks: an until_executed unique job's lock is renewed for its
-- unique_for as it is taken, owner-checked, and taken again when free (its TTL
-- ran out while the job waited), as renew_unique.lua does at a run's start:
-- here it rides the fetch, so a job run soon after its fetch costs no call of
-- its own (the worker renews again at the start of one that waited long in
-- its process). Atomic with the move: the job is on the in-progress list
-- when its lock is renewed, never after its settlement released it. A plain
-- job pays one substring search; an until_executing one (its lock goes at
-- its start) and a key outside the prefix are left alone.
local function renew_taken_lock(job)
  local decoded = cjson.decode(job)
  local unique = decoded["unique"]
  local jid = decoded["jid"]
  if type(unique) ~= "table" or type(jid) ~= "string" or jid == ""
      or unique["mode"] == "until_executing" then
    return nil
  end
  local key = unique["key"]
  if not is_held_key(key, unique_prefix) then
    return nil
  end
  local ttl = tonumber(unique["for"])
  local ms = unique_default_ms
  if ttl and ttl > 0 and ttl == ttl and ttl ~= math.huge then
    ms = math.max(1, math.floor(ttl * 1000))
  end
  -- GET answers an error for a key that is no string (not a lock: left alone).
  local holder = redis.pcall("GET", key)
  if type(holder) == "table" then
    return jid, false
  elseif not holder then
    redis.call("SET", key, jid, "PX", ms)
    return jid, jid
  end
  if holder == jid then
    redis.call("PEXPIRE", key, ms)
  end
  return jid, holder
end

local renewals = {}
if unique_prefix ~= nil and unique_prefix ~= "" then
  for i, job in ipairs(taken) do
    if string.find(job, '"unique"', 1, true) then
      local ok, jid, holder = pcall(renew_taken_lock, job)
      if ok and jid then
        renewals[#renewals + 1] = i
        renewals[#renewals + 1] = jid
        renewals[#renewals + 1] = holder
      end
    end
  end
end
-- The admissions of this call, counted (includes/fair.lua admits too): nothing
-- to do when none was counted.
if limits_prefix ~= nil and limits_prefix ~= "" then
  flush_slots() -- none left by now: each batch taken flushed its own
  flush_admitted(limits_prefix)
end
return {taken, missing, broken, sources, renewals, end_failures}
