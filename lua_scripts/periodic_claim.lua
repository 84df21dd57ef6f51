-- periodic_claim: claims one slot of one periodic entry and pushes its job.
--
-- KEYS[1] = the claim key (<ns>:periodic:claim:<entry>:<definition hash>:<slot>)
-- KEYS[2] = the last-slot hash (<ns>:periodic:last, field = entry name)
-- KEYS[3] = the queue list, KEYS[4] = the queues set, KEYS[5] = the queue's
--           wake-up marker (as enqueue.lua)
-- KEYS[6] = the entry's running lock (<ns>:periodic:running:<entry>), used
--           only for an overlap=False entry
-- ARGV[1] = the claim's TTL (ms), ARGV[2] = the entry's name,
-- ARGV[3] = the slot (epoch seconds), ARGV[4] = the queue's name,
-- ARGV[5] = the job payload (JSON, with a jid derived from entry and slot),
-- ARGV[6] = the running lock's queued TTL (ms), or "" when the entry allows overlap,
-- ARGV[7] = the job's jid (the lock's value: only that run releases it)
-- Returns 1 when this call claimed the slot and pushed the job, 0 when the
-- slot was already claimed (by any process: nothing is pushed), or the
-- running lock's holder (a jid) when this call claimed the slot but skipped
-- it because the previous run of an overlap=False entry still holds the lock.
--
-- Why atomic: the claim and the push are one step, so a slot is never claimed
-- without its job (a crash between them) nor pushed twice (two processes that
-- both saw it free); the running lock is checked and taken in that same step,
-- so two slots never both see it free. The claim key is never deleted when
-- the job finishes (arq #196): it expires long after the slot is past.

if not redis.call("SET", KEYS[1], "1", "NX", "PX", ARGV[1]) then
  return 0
end
if ARGV[6] ~= "" then
  local holder = redis.call("GET", KEYS[6])
  if holder then
    return holder
  end
  redis.call("SET", KEYS[6], ARGV[7], "PX", ARGV[6])
end
redis.call("LPUSH", KEYS[3], ARGV[5])
redis.call("SADD", KEYS[4], ARGV[4])
redis.pcall("ZADD", KEYS[5], 0, "1")
-- The last slot only moves forward (a late claim of an older slot keeps it).
local last = tonumber(redis.call("HGET", KEYS[2], ARGV[2]) or "")
if last == nil or tonumber(ARGV[3]) > last then
  redis.call("HSET", KEYS[2], ARGV[2], ARGV[3])
end
return 1
