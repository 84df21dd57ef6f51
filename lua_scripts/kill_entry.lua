-- kill_entry: moves one entry of the retry or schedule set into the dead set
-- (an operator's "kill": give up on it now), in one step.
--
-- KEYS[1] = the retry or schedule sorted set, KEYS[2] = the dead set
-- ARGV[1] = the entry exactly as it is in the set
-- ARGV[2] = its dead entry (the caller added `error_class`/`failed_at` if it
--           wished; the raw entry itself for one that is not a JSON job)
-- ARGV[3] = now (epoch seconds): the dead entry's score
-- ARGV[4] = dead-set cap (entries), ARGV[5] = dead-set cutoff (epoch s): the
--           dead set is trimmed as file.lua trims it
-- ARGV[6] = (optional) the periodic running-lock prefix: the job of an
--           overlap=False entry releases its running lock (owner-checked)
--           as it dies; a unique job releases its lock (from its payload)
-- Returns 1 when moved, 0 when the entry was already gone (moved, retried or
-- deleted by someone else).
--
-- Why one script: added and removed apart, the job could be both dead and
-- still due (and run by the poller while an operator retries it from dead);
-- two operators killing it at once would each add a dead copy.
--- @include running_lock
--- @include release_unique

if not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[2])
redis.call("ZREM", KEYS[1], ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[5])
redis.call("ZREMRANGEBYRANK", KEYS[2], 0, -(tonumber(ARGV[4]) + 1))
release_for(ARGV[1], ARGV[6])
pcall(release_unique_of, ARGV[1])
return 1
