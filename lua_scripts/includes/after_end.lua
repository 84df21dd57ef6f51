-- after_end: the end of a prerequisite of jobs enqueued with
-- `.options(after=[...])`, carried out in the atomic step that settles the
-- prerequisite (its ack, its filing into dead or its discard, an abort, a
-- burial, an operator's delete or kill), so a dependent is released, or ended,
-- exactly when its last prerequisite is, never twice.
--
-- Keys, under the namespace's after prefix A = "<ns>:after:" (keys.py):
--   A.."~waiting": hash, dependent jid -> its payload, exactly as it will be
--     pushed (the dependent's place while it waits: lifecycle WAITING)
--   A.."~left": hash, dependent jid -> how many prerequisites it still waits on
--   A..<jid>: set, the dependents waiting on prerequisite <jid> (an edge each)
-- The payload's "after" field maps each prerequisite's jid to the edge's
-- policy ("fail", "run" or "drop", workflows' `if_failed`).
--
-- The flag: A.."~waiting" exists only while some job waits (Redis deletes an
-- empty hash), and a settling step looks for dependents only then: one EXISTS
-- per call, nothing per job, in a namespace with no dependent waiting.
--
-- Exactly once: the edge set A..<jid> is deleted by the step that reads it,
-- and a dependent leaves ~waiting (HDEL) in the step that releases or ends it,
-- so a prerequisite settled twice (a duplicate run, an ack resent) finds
-- nothing the second time, and a dependent already ended is skipped.

--- @include job_end

local after_outcomes = {ack = "succeeded", dead = "dead", burial = "dead", operator_kill = "dead",
  discard = "failed", abort = "failed", operator_delete = "failed"}

-- after_on(prefix): whether some dependent waits (the flag), read once per
-- script call (a flag seen up and then cleared meanwhile costs a few lookups).
local after_flags = {}
local function after_on(prefix)
  if type(prefix) ~= "string" or prefix == "" then
    return false
  end
  if after_flags[prefix] == nil then
    after_flags[prefix] = redis.call("EXISTS", prefix .. "~waiting") == 1
  end
  return after_flags[prefix]
end

local function after_now()
  local t = redis.call("TIME")
  return tostring(tonumber(t[1]) + tonumber(t[2]) / 1000000)
end

-- after_release(prefix, ns, jid, job, entry): the dependent's last
-- prerequisite ended: onto its queue (as enqueue.lua pushes), its status
-- (when tracked) queued.
local function after_release(prefix, ns, jid, job, entry)
  local queue = type(job["queue"]) == "string" and job["queue"] or "default"
  redis.call("LPUSH", ns .. "queue:" .. queue, entry)
  redis.call("SADD", ns .. "queues", queue)
  redis.pcall("ZADD", ns .. "wakeup:" .. queue, 0, "1")
  local status_key = ns .. "status:" .. jid
  if redis.call("EXISTS", status_key) == 1 then
    redis.call("HSET", status_key, "state", "queued", "updated_at", after_now())
    redis.call("HDEL", status_key, "waiting_on")
  end
end

-- after_end(prefix, jid, outcome): prerequisite `jid` ended as `outcome`
-- ("succeeded", "failed" or "dead"). Each dependent waiting on it counts it
-- (success, or policy "run") and is released at its last; else (policy
-- "fail", the default, or "drop") it ends without running — failed with
-- DependencyFailed, or aborted with DependencyDropped — and its own
-- dependents meet that end in turn (a chain, in this same step). Returns how
-- many dependents were released.
local function after_end(prefix, jid, outcome)
  local ns = string.sub(prefix, 1, #prefix - #"after:")
  local work, released, i = {{jid, outcome}}, 0, 1
  while i <= #work do
    local pre, out = work[i][1], work[i][2]
    i = i + 1
    local edge = prefix .. pre
    local dependents = redis.call("SMEMBERS", edge)
    if #dependents > 0 then
      redis.call("DEL", edge)
    end
    for _, dep in ipairs(dependents) do
      local entry = redis.call("HGET", prefix .. "~waiting", dep)
      local ok, job = false, nil
      if entry then
        ok, job = pcall(cjson.decode, entry)
      end
      if ok and type(job) == "table" then
        local edges = type(job["after"]) == "table" and job["after"] or {}
        local policy = edges[pre] or "fail"
        if out == "succeeded" or policy == "run" then
          if redis.call("HINCRBY", prefix .. "~left", dep, -1) <= 0 then
            redis.call("HDEL", prefix .. "~waiting", dep)
            redis.call("HDEL", prefix .. "~left", dep)
            after_release(prefix, ns, dep, job, entry)
            released = released + 1
          end
        else
          redis.call("HDEL", prefix .. "~waiting", dep)
          redis.call("HDEL", prefix .. "~left", dep)
          local message = "prerequisite " .. pre .. " " .. out
          if policy == "drop" then
            record_end(entry, ns, "aborted", "DependencyDropped", message, after_now())
          else
            record_end(entry, ns, "failed", "DependencyFailed", message, after_now())
          end
          work[#work + 1] = {dep, "failed"}
        end
      elseif entry then
        redis.call("HDEL", prefix .. "~waiting", dep) -- unreadable: never released
      end
    end
  end
  return released
end

-- after_job_end(prefix, entry, outcome): the end of the job whose payload is
-- `entry` (its jid read by a pattern, as job_end does), when the flag is up.
-- Best effort (pcall): bad data never stops the step that settles the job.
local function after_job_end(prefix, entry, outcome)
  if outcome == nil or type(entry) ~= "string" then
    return
  end
  local jid = string.match(entry, '"jid"%s*:%s*"([^"]+)"')
  if jid then
    pcall(after_end, prefix, jid, outcome)
  end
end

-- after_prefix_in(kinds): the after prefix a payload-reading script's kinds
-- table carries (holds.kinds_table's last entry), or nil.
local function after_prefix_in(kinds)
  if type(kinds) ~= "table" then
    return nil
  end
  for _, kind in ipairs(kinds) do
    if type(kind["after"]) == "string" then
      return kind["after"]
    end
  end
  return nil
end
