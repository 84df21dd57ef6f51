-- batch_add: adds members to a batch and enqueues them, in one step: a
-- member is pending before it can run, so its end is always counted (added
-- after its push, a member that ended first would be pending for ever).
--
-- KEYS[1] = the batch's hash, KEYS[2] = its pending set
-- then, ARGV[1] = "push": KEYS[3] = the queue list, KEYS[4] = the queues
--   set, KEYS[5] = the queue's wake-up marker; ARGV[2] = the queue's name
-- or, ARGV[1] = "schedule": KEYS[3] = the schedule set, KEYS[4] = the
--   scheduled poller's wake-up marker; ARGV[2] = when they are due (epoch s)
-- ARGV[3] = a once-token ("" for none): an add under a token the batch has
--   seen already adds nothing (a flow's stage started again by its step
--   job's second run: its members, some maybe ended, are not added twice)
-- ARGV[4] = "1": these members keep a result, so their jids are appended,
--   in this order, to the batch's results list (the hash's results_key,
--   <ns>:batch_results:<bid>; batch_results.lua reads it); "" otherwise (a
--   member that keeps none costs nothing more). A batch opened with
--   results_by_token (a flow's stage) lists only adds under a once-token:
--   a member a running step adds to it can't shift its group's order.
-- ARGV[5..] = pairs: member jid, its payload (JSON, naming the batch in
--   its "batch" field)
-- Returns the batch's total after the add; -1 when the batch is gone or
-- over (nothing written: a member of a finished batch would never count).
-- A batch is open or running while any member is pending: adding from a
-- running member (current_job().batch) is safe, since that member is pending.
-- Why atomic: the results list gets a jid in the same step as the pending
-- set, so it is listed once (a once-token's second add lists nothing either)
-- and in the order the adds happened, even beside a concurrent adder.

--- @include wake_poller

local state = redis.call("HGET", KEYS[1], "state")
if state ~= "open" and state ~= "running" then
  return -1
end
if ARGV[3] ~= "" and redis.call("HSETNX", KEYS[1], "added:" .. ARGV[3], "1") == 0 then
  return tonumber(redis.call("HGET", KEYS[1], "total"))
end
local jids, payloads = {}, {}
for i = 5, #ARGV, 2 do
  jids[#jids + 1] = ARGV[i]
  payloads[#payloads + 1] = ARGV[i + 1]
end
if #jids == 0 then
  return tonumber(redis.call("HGET", KEYS[1], "total"))
end
redis.call("SADD", KEYS[2], unpack(jids))
if ARGV[4] == "1" then
  -- A batch opened before the results list existed has no results_key: its
  -- members are not listed.
  local listed = redis.call("HMGET", KEYS[1], "results_key", "results_by_token")
  if listed[1] and (not listed[2] or ARGV[3] ~= "") then
    redis.call("RPUSH", listed[1], unpack(jids))
  end
end
local total = redis.call("HINCRBY", KEYS[1], "total", #jids)
if ARGV[1] == "schedule" then
  local due = tonumber(ARGV[2])
  for _, job in ipairs(payloads) do
    redis.call("ZADD", KEYS[3], due, job)
  end
  wake_poller(KEYS[3], KEYS[4], due)
else
  redis.call("LPUSH", KEYS[3], unpack(payloads))
  redis.call("SADD", KEYS[4], ARGV[2])
  redis.pcall("ZADD", KEYS[5], 0, "1")
end
return total
