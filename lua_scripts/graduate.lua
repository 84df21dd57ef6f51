-- graduate: moves due entries of the schedule or retry set onto their queues.
--
-- Cluster: builds queue keys and wake-up markers from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
-- The caller read the due entries and re-encoded each with its new
-- `enqueued_at`; this script moves each one atomically: still in the set?
-- push the new payload, then remove the old entry. One that can't be pushed
-- (its queue key of the wrong type) is deferred instead: its score moves
-- ARGV[3] seconds ahead, so it can't starve the entries behind it.
--
-- KEYS[1] = the schedule or retry sorted set, KEYS[2] = the queues set
-- ARGV[1] = queue key prefix, ARGV[2] = wake-up marker prefix
-- ARGV[3] = defer delay (s), ARGV[4] = now (epoch s)
-- ARGV[5..] = triples (entry as in the set, payload to push, queue name)
-- Returns {moved, {deferred entries' queue names...}}.
-- Errors (WRONGTYPE) before any write when KEYS[2] is not a set: failing at
-- its SADD after the LPUSH would push the job again on every poll, and the
-- poller's error is what wakes the key guard to move the key aside.

redis.call("SCARD", KEYS[2])
local moved, deferred = 0, {}
for i = 5, #ARGV, 3 do
  local entry, payload, queue = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call("ZSCORE", KEYS[1], entry) then
    local ok = pcall(redis.call, "LPUSH", ARGV[1] .. queue, payload)
    if ok then
      redis.call("ZREM", KEYS[1], entry)
      redis.call("SADD", KEYS[2], queue)
      redis.pcall("ZADD", ARGV[2] .. queue, 0, "1")
      moved = moved + 1
    else
      redis.call("ZADD", KEYS[1], tonumber(ARGV[4]) + tonumber(ARGV[3]), entry)
      deferred[#deferred + 1] = queue
    end
  end
end
return {moved, deferred}
