-- ack_jobs(in_progress, counter_prefix, first, listed): acknowledges finished jobs
-- (listed = false in basic mode: there is no in-progress list, only counting).
--
-- ARGV[first], ARGV[first+1] = the first finished job (exactly as fetched) and
-- its jid ("" if unreadable); ARGV[first+2], ARGV[first+3] = the second; up to
-- first + 2*count - 1, where count = tonumber(ARGV[first - 1]).
-- Each job is removed from the in-progress list (searched from the tail, where
-- the oldest fetches sit) and its orphan counter deleted: it got to finish, so
-- whatever crashes it sat through are behind it.
-- Returns the 1-based positions of acks whose job was no longer on the list
-- (orphan recovery requeued it while it ran here: it may have run twice).
local function ack_jobs(in_progress, counter_prefix, first, listed)
  local count = tonumber(ARGV[first - 1])
  local missing = {}
  if not listed then
    return missing, count
  end
  for i = 0, count - 1 do
    local raw = ARGV[first + 2 * i]
    local jid = ARGV[first + 2 * i + 1]
    if redis.call("LREM", in_progress, -1, raw) == 0 then
      missing[#missing + 1] = i + 1
    end
    if jid ~= "" then
      redis.call("DEL", counter_prefix .. jid)
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
