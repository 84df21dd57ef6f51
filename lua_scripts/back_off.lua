-- back_off: a handler raised limits.BackOff(key, seconds) (a 429 with
-- Retry-After): the key is paused for that long and the job goes back held on
-- it, first in line, as it was fetched: no retry counted, no failure filed.
--
-- KEYS[1] = the process's in-progress list
-- ARGV[1] = the job, exactly as fetched
-- ARGV[2] = the limits prefix (keys.limits_prefix)
-- ARGV[3] = the key to pause (a limit's name)
-- ARGV[4] = how long, ms (>= 1)
-- ARGV[5] = "reliable" (the job is on KEYS[1]) or "basic" (popped)
-- ARGV[6] = the kinds of hold a payload names (holds/encoding.py kinds_table, JSON;
--   includes/holds.lua): what the job holds is settled as a requeue of its
--   own process's ("shutdown_requeue"): its slots released, a unique lock
--   left (it still holds it), a periodic running lock kept
-- Returns 1 when the job was held back, 0 when it was no longer on the list
--   (recovery requeued it meanwhile: nothing changed), an error for a key
--   outside the limits' names or a pause of no time (nothing changed), or for
--   a held list or due mark of the wrong type (the job is back on the list).
-- Atomic: the job leaves the list and joins the key's held jobs in one step;
-- the pause is set before the job's slots go, so the releases let no other
-- held job of the key in (includes/holds.lua's unpark waits for the pause).

--- @include limits

local raw, prefix, name, ms = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
if not is_held_key(prefix .. name, prefix) or not ms or ms < 1 then
  return redis.error_reply("ERR back_off: a limit key and a pause of at least 1 ms")
end
if ARGV[5] == "reliable" and redis.call("LREM", KEYS[1], 1, raw) == 0 then
  return 0
end
local pause = prefix .. "~pause:" .. name
if paused_for(prefix, name) < ms then
  redis.call("SET", pause, "1", "PX", ms)
end
-- Beside every pause, <prefix>~paused lives at least as long (any_paused,
-- includes/holds.lua: a call that finds it absent asks no key of a pause).
local marker = prefix .. "~paused"
if tonumber(redis.call("PTTL", marker)) < ms then
  redis.call("SET", marker, "1", "PX", ms)
end
paused_any[prefix] = true
settle_payload_holds(raw, decode_kinds(ARGV[6]), "shutdown_requeue", true)
-- The job's own limit of that name tells limits_due.lua how many to let in
-- when the pause ends (none named: its default).
local spec = nil
local ok, decoded = pcall(cjson.decode, raw)
if ok and type(decoded) == "table" and type(decoded["limits"]) == "table" then
  for _, limit in ipairs(decoded["limits"]) do
    if type(limit) == "table" and limit[2] == name and tonumber(limit[3]) then
      local n, period_ms = limit_of(
        prefix, name, tonumber(limit[3]), math.floor((tonumber(limit[4]) or 0) * 1000))
      spec = spec_of(limit[1], n, period_ms)
      break
    end
  end
end
-- pcall: a held list or due mark of the wrong type must not lose the job (a
-- script's writes stay when it fails): it goes back on the list and the
-- caller files it as the failure it was.
if not pcall(park, prefix, name, raw, now_ms() + paused_for(prefix, name), spec, true) then
  if ARGV[5] == "reliable" then
    redis.call("LPUSH", KEYS[1], raw)
  end
  return redis.error_reply("ERR back_off: the key's held list or due mark is of the wrong type")
end
return 1
