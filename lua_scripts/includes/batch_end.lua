-- batch_end: a batch member's end, counted in the atomic step that settles
-- the member (ack, dead, discard, abort, burial, an operator's delete or
-- kill: includes/holds.lua calls it for a counted hold, holds.BATCH), and the
-- batch's callbacks enqueued in the step that ends its last member.
--
-- A batch is a hash at <ns>:batch:<bid> (the hold's key) written by
-- batch_open.lua: state ("open" until its `async with` block closes, then
-- "running", then "done"), total, succeeded, failed, dead, pending_key (the
-- set of members not ended: jids, "b:<bid>" for a child batch), results_key
-- (the list of members' jids that keep a result, batch_add.lua), parent (the
-- parent batch's hash key, for a child batch), keep (s it is kept once done),
-- and per callback "cb:<event>" (success, complete, death) a JSON object
-- {queue_key, queues_key, wakeup_key, queue, payload} built by the client
-- from keys.py, so no key is built here (cluster: all under the namespace's
-- hash tag, in the slot of KEYS).
--
-- Exactly once: a member is counted only when SREM removed it from the
-- pending set, so a duplicate run (the same payload acked twice, a job both
-- requeued and finished) counts nothing the second time, and no count can
-- go negative: counts only grow, pending only shrinks. A callback is pushed
-- only when HSETNX "fired:<event>" took, and the batch is settled ("done")
-- by the one step that finds it running with nothing pending.

local batch_outcomes = {succeeded = true, failed = true, dead = true}

-- batch_stat(key, field, n): the namespace's batch counters (<ns>:stats:batches,
-- a hash of totals that only grow, read by the Prometheus scrape), bumped in
-- the step that counts what they count; the namespace is the batch key's
-- ("<ns>:batch:<bid>", so the same hash-tag slot). Best effort: never fails
-- the step.
local function batch_stat(key, field, n)
  local ns = string.match(key, "^(.*):batch:")
  if ns then
    redis.pcall("HINCRBY", ns .. ":stats:batches", field, n)
  end
end

-- batch_fire(key, event): pushes the callback for `event` once (nothing when
-- the batch has none, or it was pushed already).
local function batch_fire(key, event, now)
  local cb = redis.call("HGET", key, "cb:" .. event)
  if not cb then
    return
  end
  if redis.call("HSETNX", key, "fired:" .. event, now) == 0 then
    return
  end
  local spec = cjson.decode(cb)
  redis.call("LPUSH", spec["queue_key"], spec["payload"])
  redis.call("SADD", spec["queues_key"], spec["queue"])
  redis.pcall("ZADD", spec["wakeup_key"], 0, "1")
  batch_stat(key, "callbacks_" .. event, 1)
end

local function batch_now()
  local t = redis.call("TIME")
  return tostring(tonumber(t[1]) + tonumber(t[2]) / 1000000)
end

-- batch_srem(pending, members): removes `members` (a list) from the pending
-- set, in chunks (unpack's stack limit); returns how many were there.
local function batch_srem(pending, members)
  local removed = 0
  for i = 1, #members, 1000 do
    removed = removed + redis.call("SREM", pending, unpack(members, i, math.min(#members, i + 999)))
  end
  return removed
end

-- batch_settle(key, members, outcome): counts the end of `members` (a list of
-- jids, or one jid; nil: counts nothing, only checks whether the batch is
-- over, as a close does) as `outcome`, then, while a batch is running with
-- nothing pending, settles it: callbacks pushed, kept `keep` s, and its own
-- end counted in its parent (a child batch is one member of its parent:
-- succeeded when every member of it did, dead when one died, else failed).
-- One SREM, one HINCRBY and one SCARD for all the members an ack call ends
-- together. Returns how many of `members` were counted (a duplicate, a
-- stranger, a batch gone: not).
local function batch_settle(key, members, outcome)
  if type(members) == "string" then
    members = {members}
  end
  local counted = 0
  local first = true
  while key do
    local fields = redis.call("HMGET", key, "pending_key", "state")
    local pending = fields[1]
    if not pending then
      return counted
    end
    if members then
      local removed = batch_srem(pending, members)
      if removed == 0 then
        return counted
      end
      if first then
        counted = removed
      end
      if not batch_outcomes[outcome] then
        outcome = "failed"
      end
      redis.call("HINCRBY", key, outcome, removed)
      batch_stat(key, "members_" .. outcome, removed)
      if outcome == "dead" then
        batch_fire(key, "death", batch_now())
      end
    end
    first = false
    if fields[2] ~= "running" or redis.call("SCARD", pending) > 0 then
      return counted
    end
    -- The last member ended: the batch is over, here and only here.
    local now = batch_now()
    local rest = redis.call("HMGET", key, "failed", "dead", "parent", "bid", "keep",
      "results_key")
    local failed, dead = tonumber(rest[1]) or 0, tonumber(rest[2]) or 0
    redis.call("HSET", key, "state", "done", "finished_at", now)
    if failed == 0 and dead == 0 then
      batch_fire(key, "success", now)
      outcome = "succeeded"
    elseif dead > 0 then
      outcome = "dead"
    else
      outcome = "failed"
    end
    batch_stat(key, "finished_" .. (outcome == "succeeded" and "success"
      or (outcome == "dead" and "dead" or "complete")), 1)
    batch_fire(key, "complete", now)
    local keep = tonumber(rest[5])
    if keep and keep > 0 then
      redis.call("EXPIRE", key, math.ceil(keep))
      -- Its results list lives as long as it (batch_add.lua writes it; absent
      -- when no member keeps a result: EXPIRE of no key does nothing).
      if rest[6] then
        redis.call("EXPIRE", rest[6], math.ceil(keep))
      end
    end
    key, members = rest[3], {"b:" .. tostring(rest[4])}
  end
  return counted
end
