-- job_end: a job that ends without its processor (buried as ProcessDied,
-- killed or deleted by an operator) tells its status and its result waiters,
-- as the worker tells them of a job that failed terminally. In the step that
-- ends it, so whoever sees it gone sees why.
--
-- record_end(entry, prefix, state, error_class, error_message, now)
--   entry: the job's payload as it was; prefix: "<ns>:" (keys.tracking_prefix;
--   "" = record nothing), from which the status hash, the result list, its
--   "gone" marker and the result channel are named as keys.py names them:
--   <ns>:status:<jid>, <ns>:result:<jid>, <ns>:result_gone:<jid>,
--   <ns>:result_ready:<jid> (cluster: with a hash-tagged namespace, in the
--   tag's slot, like KEYS).
--
-- Status: only a status hash that exists (the job is tracked; its TTL is kept)
-- and holds no end yet (complete, failed, dead, aborted) is updated. Result:
-- only for a payload that keeps one (`keep_result` > 0) and has no result nor
-- marker yet: the envelope {"ok": false, ...}, kept `keep_result` s (at most
-- max_duration), the marker as long again (a day at most), and a PUBLISH to
-- the waiters; a tracked job that keeps none publishes its new status (a
-- bare-jid waiter then reads it). A plain job costs one pattern match and one
-- EXISTS.
-- Callers run it under pcall: bad data here never stops the job's move.

local job_end_max_duration = 315360000 -- timing.MAX_DURATION (10 years)
local job_end_gone_max = 86400 -- results.RESULT_GONE_FOR
local job_end_final = {complete = true, failed = true, dead = true, aborted = true}

local function record_end(entry, prefix, state, error_class, error_message, now)
  if type(prefix) ~= "string" or prefix == "" then
    return
  end
  local jid = string.match(entry, '"jid"%s*:%s*"(%x+)"')
  if jid == nil then
    return
  end
  local status_key = prefix .. "status:" .. jid
  local tracked = redis.call("EXISTS", status_key) == 1
  local keeps = string.find(entry, '"keep_result"', 1, true) ~= nil
  if not tracked and not keeps then
    return
  end
  local ok, job = pcall(cjson.decode, entry)
  if not ok or type(job) ~= "table" or job["jid"] ~= jid then
    return
  end
  local keep = tonumber(job["keep_result"])
  if keep ~= nil and keep == keep and keep > 0 then
    -- The result first: a status key of the wrong type (an error here) must not
    -- keep the waiters waiting.
    local result_key, gone_key = prefix .. "result:" .. jid, prefix .. "result_gone:" .. jid
    if redis.call("EXISTS", result_key, gone_key) == 0 then
      local seconds = math.max(1, math.ceil(math.min(keep, job_end_max_duration)))
      local envelope = cjson.encode({ok = false, error_class = error_class,
        error_message = error_message})
      redis.call("RPUSH", result_key, envelope)
      redis.call("EXPIRE", result_key, seconds)
      redis.call("SET", gone_key, "1", "EX", seconds + math.min(seconds, job_end_gone_max))
      redis.call("PUBLISH", prefix .. "result_ready:" .. jid, "1")
    end
  end
  if tracked and not job_end_final[redis.call("HGET", status_key, "state") or ""] then
    redis.call("HSET", status_key, "state", state, "error_class", error_class,
      "error_message", error_message, "finished_at", now, "updated_at", now)
    if not (keep ~= nil and keep == keep and keep > 0) then
      -- No result will come: a waiter on a bare jid reads the finished status
      -- when woken (ResultNotKept) instead of waiting out its timeout.
      redis.call("PUBLISH", prefix .. "result_ready:" .. jid, "1")
    end
  end
end

-- end_fields(dead_entry, error_class, error_message): the error a dead entry
-- carries, else the defaults given.
local function end_fields(dead_entry, error_class, error_message)
  local ok, dead = pcall(cjson.decode, dead_entry)
  if ok and type(dead) == "table" and type(dead["error_class"]) == "string" then
    return dead["error_class"], tostring(dead["error_message"] or "")
  end
  return error_class, error_message
end
