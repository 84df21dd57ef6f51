-- periodic_claim: claims one slot of one periodic entry and pushes its job.
--
-- KEYS[1] = the claim key (<ns>:periodic:claim:<entry>:<definition hash>:<slot>)
-- KEYS[2] = the last-slot hash (<ns>:periodic:last, field = entry name)
-- KEYS[3] = the queue list, KEYS[4] = the queues set, KEYS[5] = the queue's
--           wake-up marker (as enqueue.lua)
-- ARGV[1] = the claim's TTL (ms), ARGV[2] = the entry's name,
-- ARGV[3] = the slot (epoch seconds), ARGV[4] = the queue's name,
-- ARGV[5] = the job payload (JSON, with a jid derived from entry and slot)
-- Returns 1 when this call claimed the slot and pushed the job, 0 when the
-- slot was already claimed (by any process: nothing is pushed).
--
-- Why atomic: the claim and the push are one step, so a slot is never claimed
-- without its job (a crash between them) nor pushed twice (two processes that
-- both saw it free). The claim key is never deleted when the job finishes
-- (arq #196): it expires long after the slot is past.

if not redis.call("SET", KEYS[1], "1", "NX", "PX", ARGV[1]) then
  return 0
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
