-- abort_entry: removes a waiting job (queued, scheduled or retrying) so that
-- it never runs, leaves its tombstone and counts it, in one atomic step. (A
-- failure handed over to the unsettled list: abort_unsettled.lua.)
-- Bounded: one call looks at one window of a queue (the caller walks the
-- windows), or removes one exact sorted-set entry the caller found by ZSCAN,
-- so a queue of 100,000 jobs never blocks Redis for long.
--
-- KEYS[1] = where the job waits: a queue (list), or the schedule or retry
--           sorted set
-- KEYS[2] = the tombstones (<ns>:aborted, sorted set: jid -> when aborted)
-- KEYS[3] = stats:aborted
-- ARGV[1] = JSON {jid, now (epoch s: the tombstone's score), keep (s a
--           tombstone is kept: older ones are pruned), start, window,
--           holds (the kinds of hold a payload names: holds/encoding.py kinds_table;
--           each key is released only under its kind's prefix)}
-- ARGV[2] = (sorted set only) the exact entry to remove; absent for a queue,
--           which is searched from index `start` for `window` entries.
--           Searched from the head: a push (LPUSH) moves entries towards
--           higher indexes, so a later window may see an entry twice but
--           never misses one; a fetch takes from the tail, which moves none.
-- Returns {1, the removed entry} when removed; else {0, the next window's
-- start} for a queue with more to search, or {0, -1} when there is nothing
-- more (the entry is gone, or the queue ends).
-- The removed job never runs, so what it holds is settled in the same step
-- as the "abort" rule says (released), owner-checked: its unique lock, its
-- periodic entry's running lock, ... (keys from the payload under their
-- kinds' prefixes: with a hash-tagged namespace, in its slot;
-- includes/holds.lua).

--- @include holds

local config = cjson.decode(ARGV[1])
local jid = config["jid"]
local kinds = type(config["holds"]) == "table" and config["holds"] or nil

local function tombstone(entry)
  settle_payload_holds(entry, kinds, "abort", false)
  local now = tonumber(config["now"])
  redis.call("ZADD", KEYS[2], now, jid)
  redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. (now - tonumber(config["keep"])))
  redis.pcall("INCR", KEYS[3])  -- best effort: a corrupt counter never keeps a job
end

if ARGV[2] then
  if redis.call("ZREM", KEYS[1], ARGV[2]) == 1 then
    tombstone(ARGV[2])
    return {1, ARGV[2]}
  end
  return {0, -1}
end

local start = tonumber(config["start"])
local window = tonumber(config["window"])
local entries = redis.call("LRANGE", KEYS[1], start, start + window - 1)
for i, entry in ipairs(entries) do
  -- A plain substring test first: only an entry holding the jid is decoded.
  if string.find(entry, jid, 1, true) then
    local ok, decoded = pcall(cjson.decode, entry)
    if ok and type(decoded) == "table" and decoded["jid"] == jid then
      -- LREM walks from the nearer end: the oldest job (at the tail) is found
      -- at once, not after every newer one.
      local nearer_tail = start + i - 1 > redis.call("LLEN", KEYS[1]) / 2
      redis.call("LREM", KEYS[1], nearer_tail and -1 or 1, entry)
      tombstone(entry)
      return {1, entry}
    end
  end
end
if #entries < window then
  return {0, -1}
end
return {0, start + window}
