-- quarantine: moves a key of ours that has the wrong type aside, where a human
-- can find it, and gives it a TTL, in one step (the key guard's move).
-- Cluster: builds the quarantine key's stamped variants (KEYS[2] .. ':' .. stamp) from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
--
-- KEYS[1] = the key
-- KEYS[2] = its quarantine key (<ns>:quarantine:<the key's full name>)
-- ARGV[1] = the type the key should have, as TYPE names it ("list", "set",
--           "zset", "hash", "string"), or "integer": a string holding an
--           integer as INCR reads it (a counter)
-- ARGV[2] = how long the quarantined key is kept (s)
-- ARGV[3] = the caller's clock (epoch s), used only if TIME is refused
-- Returns the name the key was moved to, or false when nothing was moved: the
-- key is absent or (by now) has the expected type. When KEYS[2] already holds
-- an earlier quarantine, the key goes to KEYS[2] .. ":" .. <now> instead, so
-- both are kept.
--
-- Why one script: the caller's TYPE check and the move are apart; checked
-- again here, a key that was fixed (or deleted) in between is left alone, and
-- no writer can slip an entry in between the check and the RENAME.

if redis.replicate_commands then redis.replicate_commands() end

local expected = ARGV[1]
local found = redis.call("TYPE", KEYS[1])["ok"]
if found == "none" then
  return false
end

-- What INCR accepts: "0", or an optional "-" then digits without a leading
-- zero, within a signed 64-bit integer.
local function holds_integer(key)
  if redis.call("STRLEN", key) > 20 then
    return false
  end
  local value = redis.call("GET", key)
  if value == "0" then
    return true
  end
  local digits = string.match(value, "^%-?([1-9]%d*)$")
  if not digits then
    return false
  end
  if #digits ~= 19 then
    return #digits < 19
  end
  if string.sub(value, 1, 1) == "-" then
    return digits <= "9223372036854775808"
  end
  return digits <= "9223372036854775807"
end

if expected == "integer" then
  if found == "string" and holds_integer(KEYS[1]) then
    return false
  end
elseif found == expected then
  return false
end

local target = KEYS[2]
if redis.call("EXISTS", target) == 1 then
  local stamp = ARGV[3]
  local clock_ok, clock = pcall(redis.call, "TIME")
  if clock_ok then
    stamp = clock[1] .. "." .. string.format("%06d", tonumber(clock[2]))
  end
  local base = KEYS[2] .. ":" .. stamp
  target = base
  local n = 1
  while redis.call("EXISTS", target) == 1 do
    target = base .. "-" .. n
    n = n + 1
  end
end
redis.call("RENAME", KEYS[1], target)
redis.call("EXPIRE", target, tonumber(ARGV[2]))
return target
