-- batch_results: one chunk of a batch's kept results, in member order: the
-- jids listed by batch_add.lua (members that keep a result), from `start`,
-- each with its result's envelope. Reads only.
--
-- KEYS[1] = the batch's results list (<ns>:batch_results:<bid>)
-- ARGV[1] = the result keys' prefix (keys.result(""), "<ns>:result:"): each
--   member's result is at prefix .. jid, as keys.py names it (cluster: under
--   the namespace's hash tag, in the slot of KEYS[1])
-- ARGV[2] = start (0-based index in the list), ARGV[3] = how many at most
-- Returns a flat array: jid, envelope (nil: no result there: failed without
-- one, expired, never kept, or a key of the wrong type), jid, envelope, ...; empty past the list's end.
-- Why a script: a chunk of N results costs one round trip instead of N + 1,
-- and the jids and their results are read at one instant.

local start = tonumber(ARGV[2])
local jids = redis.call("LRANGE", KEYS[1], start, start + tonumber(ARGV[3]) - 1)
local out = {}
for i, jid in ipairs(jids) do
  out[2 * i - 1] = jid
  -- pcall: a result key of the wrong type (the key guard moves it aside)
  -- reads as no result, not as a failed chunk.
  local envelope = redis.pcall("LINDEX", ARGV[1] .. jid, 0)
  if type(envelope) ~= "string" then
    envelope = false
  end
  out[2 * i] = envelope
end
return out
