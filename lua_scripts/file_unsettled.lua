-- file_unsettled: files the head record of the unsettled list into the retry
-- or dead set, in one step.
--
-- KEYS[1] = the unsettled list, KEYS[2] = the target set (validated by the
-- caller: retry or dead), KEYS[3] = the job's orphan counter
-- KEYS[4] = stats:processed, KEYS[5] = stats:failed
-- KEYS[6] = (optional) the abort tombstones (<ns>:aborted), KEYS[7] =
--   stats:aborted: given with ARGV[10]
-- ARGV[1] = the record expected at the head, ARGV[2] = score, ARGV[3] = payload
-- ARGV[4] = this minute's history hash ("" = history off), ARGV[5] = the job's
--   name, ARGV[6] = the history hash's TTL (s) (see includes/history.lua)
-- ARGV[7] = (optional) the kinds of hold a payload names (holds/encoding.py
--   kinds_table, JSON; includes/holds.lua): what the job holds (read from
--   ARGV[3]) is settled owner-checked in the same step as the rule of ARGV[8]
--   says ("dead": released; "retry": kept for ARGV[9] ms, the retry's wait,
--   plus its TTL)
-- ARGV[10] = (optional) the job's jid for a filing into retry, else "": as in
--   file.lua, a job with an abort tombstone (an abort answered "cancelling"
--   while it ran, before it was handed over) is settled as aborted instead:
--   off the list, counted in stats:aborted, its holds released by the
--   "abort" rule, its status and result waiters told (includes/job_end.lua:
--   ARGV[11] = "<ns>:" (keys.tracking_prefix), ARGV[12] = the result's
--   error class, ARGV[13] = its message, ARGV[14] = now (epoch s)); it never
--   runs again.
-- Returns 1 when filed, 0 when the head is another record (someone else filed
-- it, or an abort removed it: abort_unsettled.lua), 2 when settled as aborted.
--- @include history
--- @include holds
--- @include job_end

if redis.call("LINDEX", KEYS[1], 0) ~= ARGV[1] then
  return 0
end
if ARGV[10] and ARGV[10] ~= "" then
  -- A wrong-typed tombstone set (an error reply, a table) never stops a filing.
  local tombstone = redis.pcall("ZSCORE", KEYS[6], ARGV[10])
  if type(tombstone) == "string" then
    redis.call("LPOP", KEYS[1])
    redis.pcall("DEL", KEYS[3])
    redis.pcall("INCR", KEYS[7])
    settle_payload_holds(ARGV[3], decode_kinds(ARGV[7]), "abort", true)
    pcall(record_end, ARGV[3], ARGV[11], "aborted", ARGV[12], ARGV[13], ARGV[14])
    return 2
  end
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
redis.call("LPOP", KEYS[1])
redis.pcall("DEL", KEYS[3]) -- it ran to the end: its orphan count is moot
redis.pcall("INCR", KEYS[4])
redis.pcall("INCR", KEYS[5])
count_failure(ARGV[4] or "", ARGV[5] or "", tonumber(ARGV[6]))
settle_payload_holds(ARGV[3], decode_kinds(ARGV[7]), ARGV[8], true, ARGV[9])
return 1
