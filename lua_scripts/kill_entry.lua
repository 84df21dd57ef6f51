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
-- ARGV[6] = (optional; "" for none) the kinds of hold a payload names
--           (holds/encoding.py kinds_table, JSON; includes/holds.lua): what the job
--           holds (its unique lock, its overlap=False entry's running lock,
--           ...) is settled as the "operator_kill" rule says (released),
--           owner-checked, each key only under its kind's prefix
-- ARGV[7] = (optional) the tracking prefix (keys.tracking_prefix): a tracked
--           job's status says dead and its result waiters hear JobKilled (or
--           the dead entry's own error), in the same step (includes/job_end.lua)
-- Returns 1 when moved, 0 when the entry was already gone (moved, retried or
-- deleted by someone else).
--
-- Why one script: added and removed apart, the job could be both dead and
-- still due (and run by the poller while an operator retries it from dead);
-- two operators killing it at once would each add a dead copy.
--- @include holds
--- @include job_end

if not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[2])
redis.call("ZREM", KEYS[1], ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[5])
redis.call("ZREMRANGEBYRANK", KEYS[2], 0, -(tonumber(ARGV[4]) + 1))
settle_payload_holds(ARGV[1], decode_kinds(ARGV[6]), "operator_kill", false)
if ARGV[7] and ARGV[7] ~= "" then
  local error_class, error_message = end_fields(ARGV[2], "JobKilled", "killed by an operator")
  pcall(record_end, ARGV[1], ARGV[7], "dead", error_class, error_message, ARGV[3])
end
return 1
