-- ack_jobs(in_progress, counter_prefix, first, listed): acknowledges finished jobs
-- (listed = false in basic mode: there is no in-progress list, only counting).
--
-- ARGV[first - 1] = count; ARGV[first .. first + count - 1] = the finished jobs,
-- each exactly as fetched.
-- Each job is removed from the in-progress list and, if it is a suspect
-- (requeue.lua marked it when it recovered it from a dead process: only such a
-- job has an orphan counter), its orphan counter is deleted: it got to finish,
-- so whatever crashes it sat through are behind it.
-- Returns the 1-based positions of acks whose job was no longer on the list
-- (orphan recovery requeued it while it ran here: it may have run twice), and
-- the count.
--
-- Cost: processors mostly finish jobs in the order they were fetched, and the
-- oldest fetches sit at the tail, so the acked jobs usually are the list's
-- tail: one LRANGE and one LTRIM remove them all. What is not at the tail is
-- removed one LREM each (searched from the tail). Either way a duplicate
-- payload loses its tail-most copy, as LREM -1 would.
local function ack_jobs(in_progress, counter_prefix, first, listed)
  local count = tonumber(ARGV[first - 1])
  local missing = {}
  if not listed or count == 0 then
    return missing, count
  end
  local owed = {}
  for i = first, first + count - 1 do
    owed[ARGV[i]] = (owed[ARGV[i]] or 0) + 1
  end
  local tail = redis.call("LRANGE", in_progress, -count, -1)
  local trimmed, from_tail = 0, {}
  for j = #tail, 1, -1 do
    local job = tail[j]
    if (owed[job] or 0) == 0 then
      break
    end
    owed[job] = owed[job] - 1
    from_tail[job] = (from_tail[job] or 0) + 1
    trimmed = trimmed + 1
  end
  if trimmed > 0 then
    redis.call("LTRIM", in_progress, 0, -(trimmed + 1))
  end
  for i = 0, count - 1 do
    local job = ARGV[first + i]
    if (from_tail[job] or 0) > 0 then
      from_tail[job] = from_tail[job] - 1
    elseif redis.call("LREM", in_progress, -1, job) == 0 then
      missing[#missing + 1] = i + 1
    end
    if string.sub(job, 1, 11) == '{"suspect":' then
      local ok, decoded = pcall(cjson.decode, job)
      if ok and type(decoded) == "table" and type(decoded["jid"]) == "string" then
        redis.call("DEL", counter_prefix .. decoded["jid"])
      end
    end
  end
  return missing, count
end

-- count_processed(total_key, day_key, n, day_ttl): bumps the processed totals.
-- Best effort (pcall): a corrupt counter must never fail the acks before it.
local function count_processed(total_key, day_key, n, day_ttl)
  if n > 0 then
    redis.pcall("INCRBY", total_key, n)
    redis.pcall("INCRBY", day_key, n)
    redis.pcall("EXPIRE", day_key, day_ttl)
  end
end
