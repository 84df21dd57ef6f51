-- abort_running: asks whichever process runs a job to cancel it: leaves its
-- tombstone (read by every worker with its heartbeat, so an abort sent while
-- a worker's listener was cut off still arrives) and publishes the jid on the
-- abort channel (every worker's listener: at once), in one step.
--
-- KEYS[1] = the tombstones (<ns>:aborted, sorted set: jid -> when aborted)
-- KEYS[2] = (optional) the in-progress list the job was found on
-- ARGV[1] = the jid, ARGV[2] = now (epoch s), ARGV[3] = s a tombstone is
--           kept (older ones are pruned), ARGV[4] = the channel (<ns>:aborts)
-- ARGV[5] = (with KEYS[2]) the job's entry as found on that list
-- Returns how many listeners the notification reached; -1 when PUBLISH was
-- refused (an ACL without the channel): the tombstone alone then carries the
-- abort, within a heartbeat; -2 when the job is no longer on KEYS[2] (filed
-- into retry, acked, requeued since it was found): nothing is written, and
-- the caller looks again. Checked in the same step as the tombstone, so an
-- abort answered "cancelling" was tombstoned while the job was still running:
-- every later settlement of it sees the tombstone (file.lua turns a retry
-- into an abort; so does file_unsettled.lua when its stopping process hands
-- the failure over instead of filing it).

if KEYS[2] and not redis.call("LPOS", KEYS[2], ARGV[5]) then
  return -2
end
local now = tonumber(ARGV[2])
redis.call("ZADD", KEYS[1], now, ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", "(" .. (now - tonumber(ARGV[3])))
local ok, heard = pcall(redis.call, "PUBLISH", ARGV[4], ARGV[1])
if ok then
  return heard
end
return -1
