-- file_unsettled: files the head record of the unsettled list into the retry
-- or dead set, in one step.
--
-- KEYS[1] = the unsettled list, KEYS[2] = the target set (validated by the
-- caller: retry or dead), KEYS[3] = the job's orphan counter
-- KEYS[4] = stats:processed, KEYS[5] = stats:failed
-- ARGV[1] = the record expected at the head, ARGV[2] = score, ARGV[3] = payload
-- ARGV[4] = this minute's history hash ("" = history off), ARGV[5] = the job's
--   name, ARGV[6] = the history hash's TTL (s) (see includes/history.lua)
-- ARGV[7] = (optional; given when KEYS[2] is the dead set) the periodic
--   running-lock prefix: a job of an overlap=False entry filed into dead
--   releases its running lock (owner-checked) in the same step
-- ARGV[8], ARGV[9] (optional) = a unique-job lock key and the jid holding it,
--   for a record filed into dead: released, owner-checked, in the same step
-- Returns 1 when filed, 0 when the head is another record (someone else filed it).
--- @include history
--- @include running_lock

--- @include release_unique

if redis.call("LINDEX", KEYS[1], 0) ~= ARGV[1] then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
redis.call("LPOP", KEYS[1])
redis.pcall("DEL", KEYS[3]) -- it ran to the end: its orphan count is moot
redis.pcall("INCR", KEYS[4])
redis.pcall("INCR", KEYS[5])
count_failure(ARGV[4] or "", ARGV[5] or "", tonumber(ARGV[6]))
release_for(ARGV[3], ARGV[7])
if ARGV[8] and ARGV[8] ~= "" then
  pcall(release_unique, ARGV[8], ARGV[9])
end
return 1
