-- acked_ends: the end a tracked job's ack carries (its kept result, its final
-- status), written in the ack's own step, beside the LREM that removes it: a
-- waiter that sees the job gone from the in-progress list sees its result
-- and its final status too, and the worker pays no round trip per job for
-- them (they ride the batched ack). A plain ack batch sends nothing: the
-- block is the call's last, and absent (ARGV[at] nil) means none.
--
-- ARGV[at] = "<ns>:" (keys.tracking_prefix; absent: no block), ARGV[at + 1] =
--   e, the number of ends, then e groups of 5:
--   (jid, status, status_ttl, envelope, result_ttl)
--   then s, the number of "working" writes, and s groups of 4:
--   (jid, fields, started_at, status_ttl): see write_started
--   status: the fields to HSET as a flat JSON array of strings, name then
--     value (commands.status_json; "" for none),
--     kept status_ttl s; envelope: the result envelope ("" for none) of the
--     one-key shape (its "gone_for" field: store/results.py), its key kept
--     result_ttl s (keep_result + gone_for): no result_gone marker is written.
-- Keys are named from the prefix as keys.py names them (<ns>:status:<jid>,
-- <ns>:result:<jid>, channel <ns>:result_ready:<jid>); with a hash-tagged
-- namespace they are in the tag's slot, like KEYS.
--
-- Written whether or not the ack found its job (a job recovery requeued ran
-- here all the same: its result is true, as it was when the worker wrote it
-- before the ack). pcall per job: a key of the wrong type never fails the
-- acks around it (its failure is returned, for the worker to log).

local acked_ends_final = {complete = true, failed = true, dead = true, aborted = true}

-- The list holds one element: a jid's result key rarely exists before its end
-- (one end per jid), so it is pushed without a DEL first and trimmed only when
-- it held one already (a rerun's); a key of another type is replaced, as a
-- DEL then RPUSH did (a command less per result: inside a script the cost is
-- per command). One key, no marker beside it: the envelope says how long its
-- key outlives its keeping (a new key with a TTL is most of a result's cost
-- in Redis). A marker an older run left is left to expire: a reader finds
-- the list first.
local function write_result(prefix, jid, envelope, result_ttl)
  local result_key = prefix .. "result:" .. jid
  local length = redis.pcall("RPUSH", result_key, envelope)
  if type(length) == "table" then
    redis.call("DEL", result_key)
    redis.call("RPUSH", result_key, envelope)
  elseif length > 1 then
    redis.call("LTRIM", result_key, -1, -1)
  end
  redis.call("EXPIRE", result_key, tonumber(result_ttl))
end

-- status_fields(json): the flat array of names and values the worker sends,
-- as decoded (no loop per field: HSET takes it as it is); its "state".
local function status_fields(json)
  local flat = cjson.decode(json)
  local state = nil
  for i = 1, #flat - 1, 2 do
    if flat[i] == "state" then
      state = flat[i + 1]
    end
  end
  return flat, state
end

-- write_status: returns true when the state written is an end (complete, ...).
local function write_status(prefix, jid, status, status_ttl)
  local flat, state = status_fields(status)
  if #flat > 0 then
    local status_key = prefix .. "status:" .. jid
    redis.call("HSET", status_key, unpack(flat))
    redis.call("EXPIRE", status_key, tonumber(status_ttl))
  end
  return acked_ends_final[state] ~= nil
end

-- write_acked_end: one job's end; appends to `failed` the key and error of a
-- write that failed, and to `ready` the jid's channel when its waiters must
-- hear of it: a result written, or (none kept) an end state, so a bare jid's
-- waiter looks again (publish_ready tells them, once per call).
local function write_acked_end(failed, ready, prefix, jid, status, status_ttl, envelope,
    result_ttl)
  local publish = false
  if envelope ~= "" then
    local ok, err = pcall(write_result, prefix, jid, envelope, result_ttl)
    if ok then
      publish = true
    else
      failed[#failed + 1] = prefix .. "result:" .. jid
      failed[#failed + 1] = tostring(err)
    end
  end
  if status ~= "" then
    local ok, ended = pcall(write_status, prefix, jid, status, status_ttl)
    if not ok then
      failed[#failed + 1] = prefix .. "status:" .. jid
      failed[#failed + 1] = tostring(ended)
    elseif envelope == "" and ended then
      publish = true
    end
  end
  if publish then
    ready[#ready + 1] = prefix .. "result_ready:" .. jid
  end
end

-- publish_ready(channels): PUBLISH each channel somebody listens to. One
-- PUBSUB NUMSUB asks for all of them (most kept results have no waiter: a
-- PUBLISH each would be a command per job for nobody). Nothing is missed: the
-- script is atomic, so a waiter subscribed before it is counted here and
-- hears it, and one subscribed after it looks after its subscription is
-- confirmed (client/waiters.py) and finds what this step wrote. Only a
-- plain SUBSCRIBE is counted (a PSUBSCRIBE pattern is not: nothing of ours
-- listens so); on a Redis Cluster, whose waiters block on the result key
-- instead (client/results.py, wait_blocking), only this node's are counted.
-- In slices: unpack's stack is bounded. A Redis user refused PUBSUB (an ACL
-- that allows PUBLISH only) publishes every channel, as before: the ack is
-- never failed for it.
local function publish_ready(channels)
  for first = 1, #channels, 500 do
    local last = math.min(first + 499, #channels)
    local counts = redis.pcall("PUBSUB", "NUMSUB", unpack(channels, first, last))
    if counts["err"] then
      for i = first, last do
        redis.call("PUBLISH", channels[i], "1")
      end
    else
      for i = 1, #counts, 2 do
        if tonumber(counts[i + 1]) > 0 then
          redis.call("PUBLISH", counts[i], "1")
        end
      end
    end
  end
end

-- A run's "working" status rides the fetch after its start (coalesced, never
-- awaited by the handler). Calls go on several connections, so it may land
-- after that run's end was written: it is skipped when the hash already says
-- an end (or a retry) written at or after this run's start, the worker's own
-- clock on both sides (a client writes only queued/scheduled, or aborted for
-- a job that never ran).
local acked_ends_after_run = {complete = true, failed = true, dead = true, aborted = true,
  retrying = true}

local function write_started(prefix, jid, fields_json, started_at, status_ttl)
  local key = prefix .. "status:" .. jid
  local now = redis.call("HMGET", key, "state", "updated_at")
  local updated = tonumber(now[2])
  if now[1] and acked_ends_after_run[now[1]] and updated and updated >= tonumber(started_at) then
    return
  end
  local flat = cjson.decode(fields_json)
  redis.call("HSET", key, unpack(flat))
  redis.call("EXPIRE", key, tonumber(status_ttl))
end

-- write_acked_ends(at): the block at ARGV[at] (absent: nothing to write).
-- Returns, flat, the status key and error of each write that failed (a key of
-- the wrong type: the worker logs it and its key guard moves it aside).
local function write_acked_ends(at)
  local failed = {}
  local prefix = ARGV[at]
  if prefix == nil then
    return failed
  end
  local n = tonumber(ARGV[at + 1]) or 0
  local last = at + 1 + 5 * n
  local ready = {}
  for i = at + 2, last, 5 do
    write_acked_end(failed, ready, prefix, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
      ARGV[i + 4])
  end
  publish_ready(ready)
  local starts = tonumber(ARGV[last + 1]) or 0
  for i = last + 2, last + 1 + 4 * starts, 4 do
    local ok, err = pcall(write_started, prefix, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
    if not ok then
      failed[#failed + 1] = prefix .. "status:" .. ARGV[i]
      failed[#failed + 1] = tostring(err)
    end
  end
  return failed
end
