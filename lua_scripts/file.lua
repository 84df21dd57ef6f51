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
-- ARGV[12..14] = (optional, only for a job that holds a lock) the lock's key,
--   the job's jid, and the TTL (ms) the lock keeps while a retry waits, or ""
--   to release it: owner-checked, in the same step as the filing. Given for a
--   terminal filing (dead, discard) of an `until_executed` unique job (""),
--   and for every filing of a job of an overlap=False periodic entry.
-- Returns 1 when filed; 0 when the job was no longer on the list (recovery
-- requeued it while it ran here: it will run again, so it is not filed).
-- Written before removed: a script stopped halfway keeps the job somewhere.

--- @include wake_poller
--- @include history
--- @include running_lock

local listed = ARGV[11] ~= "0"
if listed and not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return 0
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
if ARGV[12] and ARGV[12] ~= "" then
  if ARGV[14] and ARGV[14] ~= "" then
    pcall(retake_running_lock, ARGV[12], ARGV[13], tonumber(ARGV[14]))
  else
    pcall(release_running_lock, ARGV[12], ARGV[13])
  end
end
local day_ttl = tonumber(ARGV[7])
for _, key in ipairs({KEYS[4], KEYS[5], KEYS[6], KEYS[7]}) do
  redis.pcall("INCR", key)
end
redis.pcall("EXPIRE", KEYS[6], day_ttl)
redis.pcall("EXPIRE", KEYS[7], day_ttl)
count_failure(ARGV[8], ARGV[9], tonumber(ARGV[10]))
return 1
