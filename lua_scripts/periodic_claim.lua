-- periodic_claim: claims one slot of one periodic entry and pushes its job.
--
-- KEYS[1] = the claim key (<ns>:periodic:claim:<entry>:<slot>: the entry's name
--           and the slot's time, nothing else, so two versions of one entry
--           live at once claim the same key)
-- KEYS[2] = the last-slot hash (<ns>:periodic:last, field = entry name)
-- KEYS[3] = the queue list, KEYS[4] = the queues set, KEYS[5] = the queue's
--           wake-up marker (as enqueue.lua)
-- KEYS[6] = the entry's running lock (<ns>:periodic:running:<entry>), used
--           only for an overlap=False entry
-- KEYS[7] = the same slot's claim key as releases before issue 21 wrote it
--           (<ns>:periodic:claim:<entry>:<definition hash>:<slot>): checked and
--           written too, so while old and new processes are both live (the
--           upgrade's rolling deploy) each slot still runs once. Transitional.
-- ARGV[1] = the claim, a JSON object:
--   name       the entry's name (the field of KEYS[2])
--   slot       the slot (epoch seconds, a string: written as it is into KEYS[2])
--   queue      the queue's name
--   jid        the job's jid (the running lock's value: only that run releases it)
--   claim_ms   how long the claim key lives (ms): until no process may still
--              claim the slot on time, plus a margin (the ticker's choice)
--   lock_ms    the running lock's queued TTL (ms), or 0 when the entry allows overlap
--   catch_up   true for a missed slot (misfire="run_once"): claimed only when
--              the entry's last slot is older, so a slot someone ran (or a
--              later one) is never run again, whatever became of its claim key
-- ARGV[2] = the job payload (JSON)
-- Returns one of
--   {"pushed"}                       claimed here, the job pushed
--   {"taken"}                        already claimed (by any process): nothing done
--   {"done"}                         catch_up, and the entry's last slot is not
--                                    older: nothing done
--   {"held", <jid>}                  claimed here but skipped: the previous run of
--                                    an overlap=False entry (jid) holds the lock
--   {"wrongtype", <key>, <type>, <expected>}  a key this claim writes has the
--                                    wrong type: NOTHING was written (the caller
--                                    moves the key aside and claims again)
--
-- Why atomic: the claim and the push are one step, so a slot is never claimed
-- without its job (a crash between them) nor pushed twice (two processes that
-- both saw it free); the running lock is checked and taken in that same step,
-- so two slots never both see it free. Every key's type is checked before the
-- first write: a script stopped by WRONGTYPE halfway keeps what it wrote (a
-- claim without its job, a running lock no job holds, which skipped the entry
-- for an hour), so no write happens unless every write can. The claim key is
-- never deleted when the job finishes (arq #196): it expires after the slot
-- can no longer be claimed on time.

local claim = cjson.decode(ARGV[1])
local lock_ms = tonumber(claim["lock_ms"]) or 0

local function wrong(key, expected)
  local found = redis.call("TYPE", key)["ok"]
  if found ~= "none" and found ~= expected then
    return {"wrongtype", key, found, expected}
  end
  return nil
end

local claimed_type = redis.call("TYPE", KEYS[1])["ok"]
if claimed_type == "string" then
  return {"taken"}
elseif claimed_type ~= "none" then
  return {"wrongtype", KEYS[1], claimed_type, "string"}
end
local before_21 = redis.call("TYPE", KEYS[7])["ok"]
if before_21 == "string" then
  return {"taken"}
end
local bad = wrong(KEYS[7], "string") or wrong(KEYS[2], "hash") or wrong(KEYS[3], "list")
  or wrong(KEYS[4], "set")
if not bad and lock_ms > 0 then
  bad = wrong(KEYS[6], "string")
end
if bad then
  return bad
end

-- A stamp that is not a number reads as "never ran" and is overwritten below.
local last = tonumber(redis.call("HGET", KEYS[2], claim["name"]) or "")
local slot = tonumber(claim["slot"])
if claim["catch_up"] == true and last ~= nil and last >= slot then
  return {"done"}
end

local claim_ms = math.max(1, math.floor(tonumber(claim["claim_ms"])))
redis.call("SET", KEYS[1], "1", "PX", claim_ms)
redis.call("SET", KEYS[7], "1", "PX", claim_ms)
if lock_ms > 0 then
  local holder = redis.call("GET", KEYS[6])
  if holder then
    return {"held", holder}
  end
  redis.call("SET", KEYS[6], claim["jid"], "PX", math.floor(lock_ms))
end
redis.call("LPUSH", KEYS[3], ARGV[2])
redis.call("SADD", KEYS[4], claim["queue"])
redis.pcall("ZADD", KEYS[5], 0, "1")
-- The last slot only moves forward (a late claim of an older slot keeps it).
if last == nil or slot > last then
  redis.call("HSET", KEYS[2], claim["name"], claim["slot"])
end
return {"pushed"}
