-- periodic_set_aside_last: moves one entry's unreadable last-slot stamp aside,
-- where a human can find it, and lets the entry start afresh.
--
-- KEYS[1] = the last-slot hash (<ns>:periodic:last)
-- KEYS[2] = where bad stamps go (<ns>:quarantine:<ns>:periodic:last, a hash)
-- ARGV[1] = the entry's name (the field), ARGV[2] = the stamp as the caller
--           read it, ARGV[3] = how long the set-aside hash is kept (s)
-- Returns 1 when the stamp was moved, 0 when the field no longer holds what the
-- caller read (a claim wrote a good stamp meanwhile: left alone), or -1 when
-- KEYS[2] is not a hash (nothing moved: the stamp is only ignored).
--
-- Why one script: read apart from the delete, a good stamp written in between
-- by another process's claim would be deleted; here the value is compared and
-- moved in one step.

local kind = redis.call("TYPE", KEYS[2])["ok"]
if kind ~= "none" and kind ~= "hash" then
  return -1
end
if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call("HSET", KEYS[2], ARGV[1], ARGV[2])
redis.call("EXPIRE", KEYS[2], tonumber(ARGV[3]))
redis.call("HDEL", KEYS[1], ARGV[1])
return 1
