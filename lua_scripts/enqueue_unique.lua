-- enqueue_unique: for each job, takes its unique-job lock and pushes (or
-- schedules) it, in one atomic step: never a lock without its job, never two
-- jobs under one lock. Jobs are taken in order, so a later job under the key
-- of an earlier one in the same call is refused, naming the earlier one.
--
-- KEYS[1] = the queue list, KEYS[2] = the queues set, KEYS[3] = the queue's
--           wake-up marker
-- KEYS[4] = the schedule set, KEYS[5] = the scheduled poller's wake-up marker
-- KEYS[5 + i] = job i's lock key (<ns>:unique:<name>:<digest>)
-- ARGV[1] = the queue's name
-- ARGV[2] = the quarantine prefix (<ns>:quarantine:), ARGV[3] = how long a
--   quarantined key is kept (s)
-- ARGV[4 + 4(i-1) ..] = job i's jid (the lock's value), lock TTL (ms, > 0),
--   payload (JSON), and when it is due (epoch s) for a delayed job or "" to
--   push it now
-- Returns, per job in order, the jid holding its lock: its own when it was
-- enqueued, the holder's when not (then the job is written nowhere); then,
-- for each lock key found holding another type than a string, the key and
-- where it was moved (<ns>:quarantine:<key>, or that with ":<jid>" when an
-- earlier quarantine of the key is still there) before the lock was taken:
-- a wrong-typed key would otherwise refuse every enqueue of its job with a
-- raw WRONGTYPE; moved, it is kept (with a TTL) for a human to look at.
-- Cluster: the quarantine key is built from a prefix that starts with the
-- namespace, so with a hash-tagged namespace it is in the tag's slot.

--- @include wake_poller

local pushed, holders, moved = {}, {}, {}
local earliest = nil

-- A lock key holding a list, hash...: moved aside (kept for a human), so the
-- SET NX below takes a fresh lock. Returns nothing when the key is a string.
local function quarantine_wrong_type(key, jid)
  local kind = redis.call("TYPE", key)["ok"]
  if kind == "none" or kind == "string" then
    return
  end
  local target = ARGV[2] .. key
  if redis.call("EXISTS", target) == 1 then
    target = target .. ":" .. jid
  end
  redis.call("RENAME", key, target)
  redis.call("EXPIRE", target, tonumber(ARGV[3]))
  moved[#moved + 1] = key
  moved[#moved + 1] = target
end

for i = 6, #KEYS do
  local at = 4 + 4 * (i - 6)
  local jid, ttl, job, due = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local taken = redis.call("SET", KEYS[i], jid, "NX", "PX", ttl)
  if not taken then
    quarantine_wrong_type(KEYS[i], jid)
    taken = redis.call("SET", KEYS[i], jid, "NX", "PX", ttl)
  end
  if taken then
    holders[#holders + 1] = jid
    if due == "" then
      pushed[#pushed + 1] = job
    else
      local score = tonumber(due)
      redis.call("ZADD", KEYS[4], score, job)
      if earliest == nil or score < earliest then
        earliest = score
      end
    end
  else
    holders[#holders + 1] = redis.call("GET", KEYS[i]) or ""
  end
end
if #pushed > 0 then
  redis.call("LPUSH", KEYS[1], unpack(pushed))
  redis.call("SADD", KEYS[2], ARGV[1])
  redis.pcall("ZADD", KEYS[3], 0, "1")
end
if earliest ~= nil then
  wake_poller(KEYS[4], KEYS[5], earliest)
end
for _, item in ipairs(moved) do
  holders[#holders + 1] = item
end
return holders
