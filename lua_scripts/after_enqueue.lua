-- after_enqueue: writes a job that runs once its prerequisites succeeded
-- (`.options(after=[...])`), in one atomic step: each prerequisite is judged
-- from what Redis knows of it now, and the job is pushed at once (all ended
-- as its edges allow), ended at once (one failed under a "fail" or "drop"
-- edge), or written waiting (<ns>:after:~waiting) with an edge per
-- prerequisite still on its way, which the prerequisite's settling step reads
-- (includes/after_end.lua). Atomic: no prerequisite can end between the
-- judging and the edge, so none is missed and none counted twice.
--
-- KEYS[1] = <ns>:after:~waiting, KEYS[2] = <ns>:after:~left (the other keys,
--   the edges <ns>:after:<jid>, places and statuses, are built from the
--   prefix: with a hash-tagged namespace, in its slot, like KEYS)
-- ARGV[1] = the after prefix "<ns>:after:", ARGV[2] = the job's jid,
-- ARGV[3] = its payload (its "after" maps each prerequisite to its edge's
--   policy), ARGV[4] = the status TTL (s; "" = the job is not tracked),
-- ARGV[5..] = the prerequisites' jids (distinct, not the job's own)
--
-- What a prerequisite is, in order: waiting itself (a chain) -> on its way;
-- its kept result -> succeeded or failed; its status -> ended (complete;
-- failed, dead, aborted) or on its way; else it is looked for (one walk over
-- every queue, the schedule, the retry, dead, parked and unsettled sets, the
-- in-progress lists (and what a basic-fetch process says it runs): a cost
-- paid only for an untracked prerequisite; a job held back by a limit is not
-- looked for):
-- found waiting or running -> on its way, found dead -> dead. Found nowhere:
-- nothing tells whether it ran, and the job is refused.
-- Returns {"queued" | "waiting" | "failed" | "dropped", n or the jid}:
-- waiting on n; or the prerequisite whose failure ended it; or
-- {"unknown", jid}: refused, nothing written.

--- @include job_end

local prefix, jid, entry = ARGV[1], ARGV[2], ARGV[3]
local ns = string.sub(prefix, 1, #prefix - #"after:")
local job = cjson.decode(entry)
local edges = job["after"]
local ended = {complete = "succeeded", failed = "failed", dead = "dead", aborted = "failed"}

local function now()
  local t = redis.call("TIME")
  return tostring(tonumber(t[1]) + tonumber(t[2]) / 1000000)
end

-- known(pre): "succeeded", "failed", "dead", "pending" or nil (nothing known).
local function known(pre)
  if redis.call("HEXISTS", KEYS[1], pre) == 1 then
    return "pending"
  end
  local result = redis.call("LINDEX", ns .. "result:" .. pre, 0)
  if result then
    local ok, envelope = pcall(cjson.decode, result)
    if ok and type(envelope) == "table" then
      return envelope["ok"] and "succeeded" or "failed"
    end
  end
  local state = redis.call("HGET", ns .. "status:" .. pre, "state")
  if state then
    return ended[state] or "pending"
  end
  return nil
end

-- look_for(wanted, found): walks the places, noting found[jid] for each jid
-- of `wanted` met ("pending", or "dead" in the dead set).
local function look_in(entries, wanted, found, as)
  for _, e in ipairs(entries) do
    local id = string.match(e, '"jid"%s*:%s*"([^"]+)"')
    if id and wanted[id] and not found[id] then
      found[id] = as
    end
  end
end

local function walk_list(key, wanted, found)
  if redis.call("TYPE", key)["ok"] ~= "list" then
    return
  end
  local size = redis.call("LLEN", key)
  for start = 0, size - 1, 1000 do
    look_in(redis.call("LRANGE", key, start, start + 999), wanted, found, "pending")
  end
end

local function walk_zset(key, wanted, found, as)
  if redis.call("TYPE", key)["ok"] ~= "zset" then
    return
  end
  local size = redis.call("ZCARD", key)
  for start = 0, size - 1, 1000 do
    look_in(redis.call("ZRANGE", key, start, start + 999), wanted, found, as)
  end
end

local function look_for(wanted, found)
  for _, queue in ipairs(redis.call("SMEMBERS", ns .. "queues")) do
    walk_list(ns .. "queue:" .. queue, wanted, found)
  end
  local listed = {}
  for _, identity in ipairs(redis.call("SMEMBERS", ns .. "in_progress_identities")) do
    listed[identity] = true
    walk_list(ns .. "in_progress:" .. identity, wanted, found)
  end
  -- A basic-fetch process has no list: what it runs is in its workers hash.
  for _, identity in ipairs(redis.call("SMEMBERS", ns .. "processes")) do
    local workers = ns .. "workers:" .. identity
    if not listed[identity] and redis.call("TYPE", workers)["ok"] == "hash" then
      look_in(redis.call("HVALS", workers), wanted, found, "pending")
    end
  end
  walk_list(ns .. "repeat_orphans", wanted, found)
  walk_list(ns .. "unsettled", wanted, found)
  walk_zset(ns .. "schedule", wanted, found, "pending")
  walk_zset(ns .. "retry", wanted, found, "pending")
  walk_zset(ns .. "dead", wanted, found, "dead")
end

local states, unknown, any_unknown = {}, {}, false
for i = 5, #ARGV do
  local state = known(ARGV[i])
  states[ARGV[i]] = state
  if state == nil then
    unknown[ARGV[i]] = true
    any_unknown = true
  end
end
if any_unknown then
  local found = {}
  look_for(unknown, found)
  for pre in pairs(unknown) do
    if not found[pre] then
      return {"unknown", pre}
    end
    states[pre] = found[pre]
  end
end

-- The job's status, when tracked, first: an end written below updates it.
local status_key = ns .. "status:" .. jid
if ARGV[4] ~= "" then
  local waiting_on = {}
  for i = 5, #ARGV do
    if states[ARGV[i]] == "pending" then
      waiting_on[#waiting_on + 1] = ARGV[i]
    end
  end
  redis.call("HSET", status_key, "state", #waiting_on > 0 and "waiting" or "queued",
    "class", tostring(job["class"]), "queue", tostring(job["queue"]),
    "enqueued_at", tostring(job["enqueued_at"]), "updated_at", now(),
    "waiting_on", table.concat(waiting_on, ","))
  redis.call("EXPIRE", status_key, math.max(1, math.ceil(tonumber(ARGV[4]))))
end

local pending = {}
for i = 5, #ARGV do
  local pre, state = ARGV[i], states[ARGV[i]]
  local policy = type(edges) == "table" and edges[pre] or "fail"
  if state == "pending" then
    pending[#pending + 1] = pre
  elseif state ~= "succeeded" and policy ~= "run" then
    local message = "prerequisite " .. pre .. " " .. state
    if policy == "drop" then
      record_end(entry, ns, "aborted", "DependencyDropped", message, now())
      return {"dropped", pre}
    end
    record_end(entry, ns, "failed", "DependencyFailed", message, now())
    return {"failed", pre}
  end
end
if #pending == 0 then
  local queue = type(job["queue"]) == "string" and job["queue"] or "default"
  redis.call("LPUSH", ns .. "queue:" .. queue, entry)
  redis.call("SADD", ns .. "queues", queue)
  redis.pcall("ZADD", ns .. "wakeup:" .. queue, 0, "1")
  return {"queued", 0}
end
redis.call("HSET", KEYS[1], jid, entry)
redis.call("HSET", KEYS[2], jid, #pending)
for _, pre in ipairs(pending) do
  redis.call("SADD", prefix .. pre, jid)
end
return {"waiting", #pending}
