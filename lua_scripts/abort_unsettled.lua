-- abort_unsettled: removes a job from the unsettled list (a failure a
-- stopping process handed over, waiting for any live process to file it into
-- retry or dead) so that it never runs again; leaves its tombstone, counts
-- it, settles what it holds as the "abort" rule says and tells its status and
-- result waiters, in one atomic step. Whoever gets the record first wins:
-- file_unsettled.lua files only the record it expects at the head, so once
-- this has removed it that filing finds another head and files nothing; once
-- it is filed, it is not here and the caller finds it in retry (or dead).
-- Bounded: one call looks at one window of the list (the caller walks them).
--
-- KEYS[1] = the unsettled list (records: JSON {set, score, payload, jid, ...})
-- KEYS[2] = the tombstones (<ns>:aborted, sorted set: jid -> when aborted)
-- KEYS[3] = stats:aborted
-- KEYS[4] = the job's orphan counter (moot once it has ended)
-- ARGV[1] = JSON {jid, now (epoch s: the tombstone's score), keep (s a
--           tombstone is kept: older ones are pruned), start, window,
--           holds (holds/encoding.py kinds_table: the kinds of hold a payload names),
--           prefix ("<ns>:", keys.tracking_prefix; "" = tell no waiters),
--           error_class, error_message (the aborted job's result envelope)}
--           The window is counted from the tail (indexes -(start+1) down to
--           -(start+window)): records are pushed at the tail (RPUSH), which
--           moves older ones further from it, so a later window may see a
--           record twice but never misses one; a filing pops the head, which
--           moves none of these indexes.
-- Returns {1, the job's payload} when removed; else {0, the next window's
-- start} with more to search, or {0, -1} when the list ends.
-- The job's run began before it was handed over, so a hold it gave back as it
-- started is not its own (settle_payload_holds' `started`).

--- @include holds
--- @include job_end

local config = cjson.decode(ARGV[1])
local jid = config["jid"]
local kinds = type(config["holds"]) == "table" and config["holds"] or nil

-- The record's job: its payload, when the record names `jid` (its own "jid"
-- field, or the payload's); nil for another job's record or an unreadable one
-- (file_unsettled quarantines those).
local function job_of(record)
  local ok, decoded = pcall(cjson.decode, record)
  if not ok or type(decoded) ~= "table" or type(decoded["payload"]) ~= "string" then
    return nil
  end
  local payload = decoded["payload"]
  if decoded["jid"] == jid then
    return payload
  end
  local parsed, job = pcall(cjson.decode, payload)
  if parsed and type(job) == "table" and job["jid"] == jid then
    return payload
  end
  return nil
end

local start = tonumber(config["start"])
local window = tonumber(config["window"])
local records = redis.call("LRANGE", KEYS[1], -(start + window), -(start + 1))
-- From the tail: the newest record first.
for i = #records, 1, -1 do
  local record = records[i]
  -- A plain substring test first: only a record holding the jid is decoded.
  if string.find(record, jid, 1, true) then
    local payload = job_of(record)
    if payload then
      redis.call("LREM", KEYS[1], -1, record)
      settle_payload_holds(payload, kinds, "abort", true)
      local now = tonumber(config["now"])
      redis.call("ZADD", KEYS[2], now, jid)
      redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. (now - tonumber(config["keep"])))
      redis.pcall("INCR", KEYS[3]) -- best effort: a corrupt counter never keeps a job
      redis.pcall("DEL", KEYS[4])
      pcall(record_end, payload, config["prefix"], "aborted", config["error_class"],
        config["error_message"], now)
      return {1, payload}
    end
  end
end
if #records < window then
  return {0, -1}
end
return {0, start + window}
