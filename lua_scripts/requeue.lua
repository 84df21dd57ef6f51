-- requeue: puts the jobs of one process's in-progress list back on their
-- queues — a dead process's (orphan recovery) or this process's own (on
-- Cluster: builds queue keys, wake-up markers and orphan-counter keys from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
-- shutdown) — in one atomic call.
--
-- KEYS[1] = the in-progress list, KEYS[2] = its owner's presence key
-- KEYS[3] = last_beat hash, KEYS[4] = repeat_orphans list, KEYS[5] = dead set
-- KEYS[6] = queues set, KEYS[7] = live_queues sorted set
-- KEYS[8] = beating_since hash, KEYS[9] = processes set,
-- KEYS[10] = the owner's workers hash, KEYS[11] = in_progress_identities set
-- KEYS[12] = beats sorted set (recovery's index of last beats)
-- Suspects: a job recovered from a dead process is counted (its orphan
-- counter, `counter_prefix .. jid`) and goes back marked as a suspect — a
-- leading `"suspect":1` field, inserted as text, nothing else re-encoded —
-- only once it has been orphaned before (its counter was already >= 1), or
-- when one more orphaning would park it (so with max_orphanings = 1 the last
-- chance runs alone too). Most crashes are a deploy or an OOM kill taking
-- innocent jobs down together: their first recovery runs at full
-- concurrency. A suspect runs alone, so a job that keeps crashing its process
-- can't take innocent neighbours down with it, and only its own count grows.
-- The mark counts only beside a counter >= 1 (fetch.lua checks; a producer
-- can write the text, not the counter).
-- ARGV[1] = JSON object:
--   identity        the list's owner
--   threshold       seconds since its last beat before it counts as dead, or
--                   false to requeue unconditionally (own list, on shutdown)
--   clock           the caller's clock (epoch s), used only if TIME is refused
--   queue_prefix, wakeup_prefix, default_queue   (see requeue_job)
--   sole_queue      (own list only) the one queue the owner reads: every job
--                   goes back there, whatever its payload names
--   (Where a job goes: the queue it was fetched from when the caller knows
--   it — its own list on shutdown, `sole_queue` or a "t:" mark — else the
--   queue its payload names. Orphan recovery can't know where a dead
--   process fetched a job from and uses the payload's: the two differ only
--   for a job pushed onto a queue other than the one its payload names.)
--   counter_prefix, counter_ttl, max_orphanings  (orphan counting)
--   live_window     a queue stamped by a live process this recently is read
--   holds           (optional) the kinds of hold a payload names
--                   (holds/encoding.py kinds_table; includes/holds.lua): a requeued
--                   job's holds are settled as the "recovery_requeue" rule
--                   says (own list: "shutdown_requeue"; requeue_job), a
--                   finished one's (d:) as "ack", one filed raw into dead as
--                   "burial"; absent: no holds minded
--   judge, judge_ttl  (recovering only) the identity of the process asking,
--                   and the longest gap between its beats that still counts
--                   as beating (heartbeat_ttl)
-- ARGV[2..] = marks: "d:<job>" finished jobs whose ack failed (dropped: that
--   is their ack), "k:<job>" jobs to leave on the list, "t:<queue>:<job>" a
--   job to put back on <queue>, the one it was fetched from (queue names
--   hold no ":").
-- Returns {-1, 0, 0, 0} when the owner is alive after all (nothing touched),
-- {-2, 0, 0, 0} when the judge's own view can't be trusted yet (nothing
-- touched: see "Who may judge" below), else
-- {moved, failed, u, c, <u queue names no live process reads>...,
--  <c pairs: queue name, jobs put back on it>...,
--  <jobs filed raw into dead because the parking list was unusable>...}.
--
-- Why one script: checked apart from the requeue, an owner that beat in
-- between would lose jobs it is still running to a second run; and two
-- processes recovering one list can't both move a job.
--
-- Who may judge. "No beat for orphan_threshold" only means "dead" if Redis
-- was up and taking beats for that whole time. A stale picture (Redis back
-- from an outage, restarted from an old snapshot, refusing writes for lack
-- of memory, or a restart the judge never saw) shows every live process as
-- silent. So the judge must itself have beaten without a gap longer than
-- judge_ttl for at least orphan_threshold, on Redis's clock, and its last
-- beat must be fresh: then Redis demonstrably took beats through the whole
-- window in which the owner wrote none. After any such stale picture the
-- judge's own run starts again and nobody is judged for orphan_threshold,
-- which gives every live process that long to beat again.
--
-- A dead owner whose list ends up empty leaves the registries here, in the
-- same step (its stamps, its process-set entry, its workers hash): checked
-- and then removed in two calls, a job landing between them would sit on a
-- list that no registry names.
--- @include requeue_job

local cfg = cjson.decode(ARGV[1])
local kinds = type(cfg["holds"]) == "table" and cfg["holds"] or nil
if redis.replicate_commands then redis.replicate_commands() end
local clock = tonumber(cfg["clock"])
local clock_ok, clock_reply = pcall(redis.call, "TIME")
if clock_ok then
  clock = tonumber(clock_reply[1]) + tonumber(clock_reply[2]) / 1000000
end

local recovering = cfg["threshold"] ~= false and cfg["threshold"] ~= nil
if recovering then
  if redis.call("EXISTS", KEYS[2]) == 1 then
    return {-1, 0, 0, 0}
  end
  -- A stamp that is not a number counts as none: the presence key decides.
  local last = tonumber(redis.call("HGET", KEYS[3], cfg["identity"]) or "")
  if last and clock - last <= tonumber(cfg["threshold"]) then
    return {-1, 0, 0, 0}
  end
  local judge_last = tonumber(redis.call("HGET", KEYS[3], cfg["judge"]) or "")
  local judge_since = tonumber(redis.call("HGET", KEYS[8], cfg["judge"]) or "")
  if not judge_last or not judge_since or clock < judge_last
      or clock - judge_last > tonumber(cfg["judge_ttl"])
      or clock - judge_since < tonumber(cfg["threshold"]) then
    return {-2, 0, 0, 0}
  end
end

local finished, keep, target = {}, {}, {}
for i = 2, #ARGV do
  local mark, job = string.sub(ARGV[i], 1, 2), string.sub(ARGV[i], 3)
  if mark == "d:" then
    finished[job] = true
  elseif mark == "t:" then
    local colon = string.find(job, ":", 1, true)
    if colon then target[string.sub(job, colon + 1)] = string.sub(job, 1, colon - 1) end
  else
    keep[job] = true
  end
end
local sole_queue = (not recovering) and cfg["sole_queue"] or nil

-- The payload with `"suspect":1` as its first field (once). Text surgery, not
-- cjson: every other byte of the payload stays as its producer wrote it.
local function as_suspect(job)
  if string.sub(job, 1, 1) ~= "{" or string.sub(job, 1, 11) == '{"suspect":' then
    return job
  end
  if string.match(job, "^{%s*}") then
    return '{"suspect":1}'
  end
  return '{"suspect":1,' .. string.sub(job, 2)
end

local function jid_of(job)
  local ok, decoded = pcall(cjson.decode, job)
  if ok and type(decoded) == "table" and type(decoded["jid"]) == "string" then
    return decoded["jid"]
  end
  return nil
end

local moved, failed = 0, 0
local kept, buried, unlisted, per_queue, queue_order = {}, {}, {}, {}, {}
-- One pass over the list as it stands, head first. Each job is written where
-- it goes and only then removed: Redis does not roll back a script stopped
-- by an error, so popping first would lose the job whenever the write failed.
for _ = 1, redis.call("LLEN", KEYS[1]) do
  local job = redis.call("LINDEX", KEYS[1], 0)
  if not job then
    break
  end
  if finished[job] then
    redis.call("LPOP", KEYS[1])
    local jid = jid_of(job)
    if jid then redis.pcall("DEL", cfg["counter_prefix"] .. jid) end
    settle_payload_holds(job, kinds, "ack", true)
  elseif keep[job] then
    kept[#kept + 1] = redis.call("LPOP", KEYS[1])
  else
    -- Only when recovering from a dead process: count how often this job was
    -- orphaned and park it for `dead` past the limit, or a job that kills its
    -- own process would come back after every crash, forever.
    local counter, parked, isolate = nil, false, false
    if recovering then
      local jid = jid_of(job)
      if jid then
        counter = cfg["counter_prefix"] .. jid
        local current = redis.pcall("GET", counter)
        local count = type(current) == "string" and tonumber(current) or nil
        if count == nil and current then
          redis.pcall("DEL", counter) -- unusable: start over, never switch the limit off
        end
        -- Orphaned before, or the next orphaning would park it: run it alone.
        isolate = (count or 0) >= 1 or (count or 0) + 2 > tonumber(cfg["max_orphanings"])
        if (count or 0) + 1 > tonumber(cfg["max_orphanings"]) then
          parked = type(redis.pcall("RPUSH", KEYS[4], job)) == "number"
          if not parked then
            -- Parking list unusable: raw into dead, for the caller to complete.
            parked = type(redis.pcall("ZADD", KEYS[5], clock, job)) == "number"
            if parked then
              buried[#buried + 1] = job
              settle_payload_holds(job, kinds, "burial", true)
            end
          end
        end
      end
    end
    local written, queue = parked, nil
    if not parked then
      local payload = job
      if isolate then
        payload = as_suspect(job)
      end
      written, queue = pcall(requeue_job, payload, cfg["queue_prefix"], cfg["wakeup_prefix"],
        cfg["default_queue"], target[job] or sole_queue, kinds,
        recovering and "recovery_requeue" or "shutdown_requeue")
    end
    if written and queue then
      if not per_queue[queue] then
        per_queue[queue] = 0
        queue_order[#queue_order + 1] = queue
      end
      per_queue[queue] = per_queue[queue] + 1
      local seen = tonumber(redis.pcall("ZSCORE", KEYS[7], queue) or "")
      if not seen or seen < clock - tonumber(cfg["live_window"]) then
        redis.pcall("SADD", KEYS[6], queue)
        unlisted[queue] = true
      end
    end
    redis.call("LPOP", KEYS[1])
    if written then
      if counter then
        redis.pcall("INCR", counter)
        redis.pcall("EXPIRE", counter, cfg["counter_ttl"])
      end
      moved = moved + 1
    else
      -- Couldn't be written (its queue key of the wrong type): to the back,
      -- so it doesn't hold up the jobs behind it; retried on the next pass.
      redis.call("RPUSH", KEYS[1], job)
      failed = failed + 1
    end
  end
end
for _, job in ipairs(kept) do
  redis.call("RPUSH", KEYS[1], job)
end
if recovering and redis.call("LLEN", KEYS[1]) == 0 then
  -- pcall: a registry key of the wrong type must not undo the requeue above
  -- (Redis keeps a script's writes up to an error); the key guard fixes it.
  redis.pcall("SREM", KEYS[11], cfg["identity"])
  redis.pcall("HDEL", KEYS[3], cfg["identity"])
  redis.pcall("HDEL", KEYS[8], cfg["identity"])
  if KEYS[12] then redis.pcall("ZREM", KEYS[12], cfg["identity"]) end
  redis.pcall("SREM", KEYS[9], cfg["identity"])
  redis.pcall("DEL", KEYS[10])
end
local reply = {moved, failed, 0, #queue_order}
for name in pairs(unlisted) do
  reply[#reply + 1] = name
  reply[3] = reply[3] + 1
end
for _, name in ipairs(queue_order) do
  reply[#reply + 1] = name
  reply[#reply + 1] = per_queue[name]
end
for _, job in ipairs(buried) do
  reply[#reply + 1] = job
end
return reply
