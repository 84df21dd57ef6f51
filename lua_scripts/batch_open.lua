-- batch_open: creates a batch, open (its callbacks can't fire while members
-- are still being added), and lists it; a child batch is added to its parent
-- as one member ("b:<bid>") in the same step.
--
-- KEYS[1] = the batch's hash (<ns>:batch:<bid>), KEYS[2] = the batches index
--   (sorted set, bid -> opened at), KEYS[3] (a child batch only) = the
--   parent's hash
-- ARGV[1] = JSON object: bid, pending_key (<ns>:batch_pending:<bid>),
--   results_key (<ns>:batch_results:<bid>, see batch_add.lua), results_by_token
--   (true: only adds under a once-token are listed: a flow's stage, whose
--   list is its group's order), description, created_at, keep (s the batch is kept once done), and
--   callbacks: {event -> {queue_key, queues_key, wakeup_key, queue, payload}}
--   (event: success, complete, death; see includes/batch_end.lua)
-- Returns 1 when opened; 0 when a batch of that bid exists already; -1 when
-- the parent is gone or over (nothing written: a member of a finished batch
-- would never be counted).
-- Why atomic: the child's membership and its own hash appear together, so
-- the parent can't finish between them, nor count a child that isn't there.

local spec = cjson.decode(ARGV[1])
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
local parent = KEYS[3]
if parent then
  local fields = redis.call("HMGET", parent, "state", "pending_key")
  if (fields[1] ~= "open" and fields[1] ~= "running") or not fields[2] then
    return -1
  end
  redis.call("SADD", fields[2], "b:" .. spec["bid"])
  redis.call("HINCRBY", parent, "total", 1)
end
local flat = {"bid", spec["bid"], "state", "open", "pending_key", spec["pending_key"],
  "results_key", spec["results_key"],
  "description", spec["description"] or "", "created_at", spec["created_at"],
  "keep", spec["keep"], "total", 0, "succeeded", 0, "failed", 0, "dead", 0}
if spec["results_by_token"] then
  flat[#flat + 1] = "results_by_token"
  flat[#flat + 1] = "1"
end
if parent then
  flat[#flat + 1] = "parent"
  flat[#flat + 1] = parent
end
for event, callback in pairs(spec["callbacks"] or {}) do
  flat[#flat + 1] = "cb:" .. event
  flat[#flat + 1] = cjson.encode(callback)
end
redis.call("HSET", KEYS[1], unpack(flat))
redis.call("ZADD", KEYS[2], spec["created_at"], spec["bid"])
-- The namespace's batch counters (includes/batch_end.lua's batch_stat), from
-- the index's name "<ns>:batches".
redis.pcall("HINCRBY", string.sub(KEYS[2], 1, -#"batches" - 1) .. "stats:batches", "opened", 1)
return 1
