-- park_unsettled: on shutdown, hands a failed job whose filing Redis refused
-- over to the unsettled list, so any live process files it later.
--
-- KEYS[1] = the process's in-progress list, KEYS[2] = the unsettled list
-- ARGV[1] = the job exactly as fetched, ARGV[2] = its record (JSON:
--   {"set": "retry"|"dead", "score": n, "payload": "...", "jid": "..."})
-- ARGV[3] = "0" in basic fetch, where the job is on no list (handed over as
--   is); else "1" (or absent)
-- Returns 1 when handed over, 0 when the job was no longer on the list.
-- Written before removed, in one step: never requeued (a `retry: False` job
-- would run again on every deploy), never lost. An abort still reaches it
-- there (abort_unsettled.lua), and one answered while it ran is honoured when
-- it is filed (file_unsettled.lua reads the tombstone).

if ARGV[3] == "0" then
  redis.call("RPUSH", KEYS[2], ARGV[2])
  return 1
end
if not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return 0
end
redis.call("RPUSH", KEYS[2], ARGV[2])
redis.call("LREM", KEYS[1], 1, ARGV[1])
return 1
