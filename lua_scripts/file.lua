-- file: settles a failed job, moving it from the in-progress list into the
-- retry or dead set (or discarding it), and counts it, in one atomic step.
--
-- KEYS[1] = the process's in-progress list
-- KEYS[2] = where it goes: the retry or the dead sorted set
-- KEYS[3] = the job's orphan counter
-- KEYS[4] = stats:processed, KEYS[5] = stats:failed
-- KEYS[6] = stats:processed:<today>, KEYS[7] = stats:failed:<today>
-- KEYS[8] = the scheduled poller's wake-up marker (touched when a retry entry
--           is the earliest of the retry set, so the retry runs on time)
-- KEYS[9] = the abort tombstones (<ns>:aborted), KEYS[10] = stats:aborted
-- ARGV[1] = the job exactly as fetched
-- ARGV[2] = score (epoch s: when to retry, or when it failed)
-- ARGV[3] = the entry to file ("" = discard: `retry: False`)
-- ARGV[4] = 1 when KEYS[2] is the dead set (trim it), else 0
-- ARGV[5] = dead-set cap (entries), ARGV[6] = dead-set cutoff (epoch s)
-- ARGV[7] = per-day stat TTL (s)
-- ARGV[8] = this minute's history hash ("" = history off), ARGV[9] = the job's
--   name ("" = none: unparseable), ARGV[10] = the history hash's TTL (s)
-- ARGV[11] = "1" when the job is on the in-progress list (reliable fetch);
--   "0" in basic fetch, where there is no list: nothing to look for or remove
-- ARGV[12] = the job's jid for a filing into retry, else "": when the job has
--   an abort tombstone, it is settled as aborted instead (off the list,
--   counted in stats:aborted, its holds settled as an abort): an abort
--   answered "cancelling" while the failure was being filed means it never
--   runs again.
-- ARGV[13] = number of holds h, then h groups of 5 (position, prefix, key,
--   owner, ttl): what the job holds, released or kept (owner-checked) in the
--   filing's step as each kind's rule for this filing says (includes/holds.lua:
--   a retry keeps an `until_executed` unique lock and a periodic running lock
--   for its delay plus their TTL; dead and discard release them). A plain job
--   sends 0.
-- ARGV[14+5h] = (only when ARGV[12] is a jid) the same block as settled by
--   an abort: used instead of the one above when the tombstone is found.
-- Returns 1 when filed; 0 when the job was no longer on the list (recovery
-- requeued it while it ran here: it will run again, so it is not filed); 2
-- when it was settled as aborted instead of retried (its tombstone).
-- Written before removed: a script stopped halfway keeps the job somewhere.
-- A job others wait on (after=[...]) ends for them here too, dead or failed
-- (includes/after_end.lua; the after prefix read off KEYS[9], "<ns>:aborted").

--- @include wake_poller
--- @include history
--- @include holds

local listed = ARGV[11] ~= "0"
local after_prefix = string.sub(KEYS[9], 1, #KEYS[9] - #"aborted") .. "after:"
if listed and not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return 0
end
local aborted_holds_at = 14 + 5 * (tonumber(ARGV[13]) or 0)
if ARGV[12] ~= "" then
  -- A wrong-typed tombstone set (an error reply, a table) never stops a filing.
  local tombstone = redis.pcall("ZSCORE", KEYS[9], ARGV[12])
  if type(tombstone) == "string" then
    if listed then
      redis.call("LREM", KEYS[1], -1, ARGV[1])
    end
    redis.pcall("DEL", KEYS[3])
    redis.pcall("INCR", KEYS[10])
    settle_holds(aborted_holds_at, nil)
    if after_on(after_prefix) then
      after_job_end(after_prefix, ARGV[1], "failed")
    end
    return 2
  end
end
if ARGV[3] ~= "" then
  redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
  if ARGV[4] == "1" then
    redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[6])
    redis.call("ZREMRANGEBYRANK", KEYS[2], 0, -(tonumber(ARGV[5]) + 1))
  else
    wake_poller(KEYS[2], KEYS[8], tonumber(ARGV[2]))
  end
end
if listed then
  redis.call("LREM", KEYS[1], -1, ARGV[1])
end
redis.pcall("DEL", KEYS[3])
settle_holds(13, nil)
if (ARGV[3] == "" or ARGV[4] == "1") and after_on(after_prefix) then
  after_job_end(after_prefix, ARGV[1], ARGV[3] == "" and "failed" or "dead")
end
local day_ttl = tonumber(ARGV[7])
for _, key in ipairs({KEYS[4], KEYS[5], KEYS[6], KEYS[7]}) do
  redis.pcall("INCR", key)
end
redis.pcall("EXPIRE", KEYS[6], day_ttl)
redis.pcall("EXPIRE", KEYS[7], day_ttl)
count_failure(ARGV[8], ARGV[9], tonumber(ARGV[10]))
return 1
