-- enqueue_unique: takes a unique-job lock and pushes (or schedules) its job, in
-- one atomic step: never a lock without its job, never two jobs under one lock.
--
-- KEYS[1] = the lock key (<ns>:unique:<name>:<digest>)
-- KEYS[2] = the queue list, KEYS[3] = the queues set, KEYS[4] = the queue's
--           wake-up marker
-- KEYS[5] = the schedule set, KEYS[6] = the scheduled poller's wake-up marker
-- ARGV[1] = the job's jid (the lock's value), ARGV[2] = lock TTL (ms, > 0)
-- ARGV[3] = the queue's name, ARGV[4] = the payload (JSON)
-- ARGV[5] = when it is due (epoch s) for a delayed job, "" to push it now
-- Returns {1, jid} when enqueued; {0, holder's jid} when the lock is held (the
-- job is not written anywhere).

--- @include wake_poller

if not redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return {0, redis.call("GET", KEYS[1])}
end
if ARGV[5] == "" then
  redis.call("LPUSH", KEYS[2], ARGV[4])
  redis.call("SADD", KEYS[3], ARGV[3])
  redis.pcall("ZADD", KEYS[4], 0, "1")
else
  local due = tonumber(ARGV[5])
  redis.call("ZADD", KEYS[5], due, ARGV[4])
  wake_poller(KEYS[5], KEYS[6], due)
end
return {1, ARGV[1]}
