-- periodic_running: re-takes or releases an overlap=False entry's running lock,
-- only for the run that holds it.
--
-- KEYS[1] = the entry's running lock (<ns>:periodic:running:<entry>)
-- ARGV[1] = the run's jid, ARGV[2] = a TTL in ms to set (re-take, with the
--           active TTL: the run starts), or "" to release
-- (The worker calls it at run start; the moves of a job change the lock inside
-- their own scripts: see includes/holds.lua.)
-- Returns 1 when the lock was this run's (and was extended or deleted), or was
-- free and a re-take took it (its TTL ran out while the job waited); else 0
-- (another run holds it).
--
-- Why atomic: the owner check and the change are one step, so an old run never
-- extends or releases a lock a newer run took after the old one's expired.

local holder = redis.call("GET", KEYS[1])
if not holder and ARGV[2] ~= "" then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  return 1
end
if holder ~= ARGV[1] then
  return 0
end
if ARGV[2] == "" then
  redis.call("DEL", KEYS[1])
else
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 1
