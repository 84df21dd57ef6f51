-- acked_ends: the end a tracked job's ack carries (its kept result, its final
-- status), written in the ack's own step, beside the LREM that removes it: a
-- waiter that sees the job gone from the in-progress list sees its result
-- and its final status too, and the worker pays no round trip per job for
-- them (they ride the batched ack). A plain ack batch sends nothing: the
-- block is the call's last, and absent (ARGV[at] nil) means none.
--
-- ARGV[at] = "<ns>:" (keys.tracking_prefix; absent: no block), ARGV[at + 1] =
--   e, the number of ends, then e groups of 6:
--   (jid, status, status_ttl, envelope, result_ttl, gone_ttl)
--   then s, the number of "working" writes, and s groups of 4:
--   (jid, fields, started_at, status_ttl): see write_started
--   status: the fields to HSET as a JSON object of strings ("" for none),
--     kept status_ttl s; envelope: the result envelope ("" for none), kept
--     result_ttl s, its "gone" marker gone_ttl s (store/results.py names).
-- Keys are named from the prefix as keys.py names them (<ns>:status:<jid>,
-- <ns>:result:<jid>, <ns>:result_gone:<jid>, channel <ns>:result_ready:<jid>);
-- with a hash-tagged namespace they are in the tag's slot, like KEYS.
--
-- Written whether or not the ack found its job (a job recovery requeued ran
-- here all the same: its result is true, as it was when the worker wrote it
-- before the ack). pcall per job: a key of the wrong type never fails the
-- acks around it (its failure is returned, for the worker to log).

local acked_ends_final = {complete = true, failed = true, dead = true, aborted = true}

local function write_result(prefix, jid, envelope, result_ttl, gone_ttl)
  local result_key = prefix .. "result:" .. jid
  redis.call("DEL", result_key)
  redis.call("RPUSH", result_key, envelope)
  redis.call("EXPIRE", result_key, tonumber(result_ttl))
  redis.call("SET", prefix .. "result_gone:" .. jid, "1", "EX", tonumber(gone_ttl))
end

-- write_status: returns true when the state written is an end (complete, ...).
local function write_status(prefix, jid, status, status_ttl)
  local fields = cjson.decode(status)
  local flat = {}
  for name, value in pairs(fields) do
    flat[#flat + 1] = name
    flat[#flat + 1] = tostring(value)
  end
  if #flat > 0 then
    local status_key = prefix .. "status:" .. jid
    redis.call("HSET", status_key, unpack(flat))
    redis.call("EXPIRE", status_key, tonumber(status_ttl))
  end
  return acked_ends_final[fields["state"]] ~= nil
end

-- write_acked_end: one job's end; appends to `failed` the key and error of a
-- write that failed. The waiters hear of it once: a result written, or (none
-- kept) an end state, so a bare jid's waiter looks again.
local function write_acked_end(failed, prefix, jid, status, status_ttl, envelope, result_ttl,
    gone_ttl)
  local publish = false
  if envelope ~= "" then
    local ok, err = pcall(write_result, prefix, jid, envelope, result_ttl, gone_ttl)
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
    redis.call("PUBLISH", prefix .. "result_ready:" .. jid, "1")
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
  local flat = {}
  for name, value in pairs(cjson.decode(fields_json)) do
    flat[#flat + 1] = name
    flat[#flat + 1] = tostring(value)
  end
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
  local last = at + 1 + 6 * n
  for i = at + 2, last, 6 do
    write_acked_end(failed, prefix, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4],
      ARGV[i + 5])
  end
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
