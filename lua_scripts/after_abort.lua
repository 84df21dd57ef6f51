-- after_abort: aborts a job that waits on others (`.options(after=[...])`):
-- it leaves <ns>:after:~waiting, so it never runs, its tombstone is left and
-- it is counted, and the jobs waiting on it meet its end as a failure (their
-- edges' policies), all in one atomic step (includes/after_end.lua): no
-- prerequisite can release it meanwhile.
--
-- KEYS[1] = <ns>:after:~waiting, KEYS[2] = <ns>:after:~left,
-- KEYS[3] = the tombstones (<ns>:aborted), KEYS[4] = stats:aborted
-- ARGV[1] = the after prefix "<ns>:after:", ARGV[2] = the jid,
-- ARGV[3] = now (epoch s: the tombstone's score), ARGV[4] = s a tombstone is kept
-- Returns its payload when it was waiting (removed), else false. Its status
-- and result waiters are told by the caller (as for any job an abort removed).

--- @include after_end

local entry = redis.call("HGET", KEYS[1], ARGV[2])
if not entry then
  return false
end
redis.call("HDEL", KEYS[1], ARGV[2])
redis.call("HDEL", KEYS[2], ARGV[2])
local now = tonumber(ARGV[3])
redis.call("ZADD", KEYS[3], now, ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[3], "-inf", "(" .. (now - tonumber(ARGV[4])))
redis.pcall("INCR", KEYS[4])
pcall(after_end, ARGV[1], ARGV[2], "failed")
return entry
