-- release_lock: deletes a lock only if its owner still holds it.
--
-- KEYS[1] = the lock key; ARGV[1] = the owner's token
-- Returns 1 when released, 0 when held by someone else (or expired).

if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
