-- renew_unique: unique jobs' runs start: each one's lock is renewed for its
-- unique_for counted from now, only for the job that holds it (owner-checked),
-- and taken again when it is free (its TTL ran out while the job waited), so
-- no second copy can be enqueued, and run, beside it. One call for the jobs
-- that started together (the worker coalesces them).
--
-- KEYS[i] = job i's unique lock (<ns>:unique:<name>:<digest>)
-- ARGV[2i - 1] = job i's jid (the lock's value), ARGV[2i] = its unique_for
--   (ms, > 0)
-- Returns, per job in order, the jid holding its lock afterwards: its own
-- when renewed or taken, another copy's jid when that copy holds it (then it
-- is left alone: not ours to extend), or false when the key is not a string
-- (not a lock: left alone, for the caller to name).
--
-- Why atomic: each owner check and its PEXPIRE/SET are one step, so an old
-- copy never extends a lock a newer copy took after the old one's ran out.

local holders = {}
for i = 1, #KEYS do
  local jid, ttl = ARGV[2 * i - 1], ARGV[2 * i]
  local kind = redis.call("TYPE", KEYS[i])["ok"]
  if kind == "none" then
    redis.call("SET", KEYS[i], jid, "PX", ttl)
    holders[i] = jid
  elseif kind ~= "string" then
    holders[i] = false
  else
    local holder = redis.call("GET", KEYS[i])
    if holder == jid then
      redis.call("PEXPIRE", KEYS[i], ttl)
    end
    holders[i] = holder
  end
end
return holders
