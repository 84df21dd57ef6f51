-- enqueue: pushes jobs onto one queue, lists the queue, and touches its
-- wake-up marker, in one call (one round trip for any number of jobs).
--
-- KEYS[1] = the queue list, KEYS[2] = the queues set, KEYS[3] = the queue's
-- wake-up marker (a sorted set idle workers block on with BZPOPMIN)
-- ARGV[1] = the queue's name, ARGV[2..] = job payloads (JSON)
-- Returns the queue's length after the push.
-- Producers in other languages may do the same with LPUSH + SADD (+ ZADD of
-- the marker for millisecond pickup).

local length = redis.call("LPUSH", KEYS[1], unpack(ARGV, 2))
redis.call("SADD", KEYS[2], ARGV[1])
redis.pcall("ZADD", KEYS[3], 0, "1")
return length
