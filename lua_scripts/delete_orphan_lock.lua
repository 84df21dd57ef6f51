-- delete_orphan_lock: deletes a unique-job lock whose holder is nowhere — not
-- queued, scheduled, retrying, in progress (on any in-progress list or running
-- in a worker's slot), handed over unsettled or parked as a repeat orphan —
-- in one atomic step, so a lock whose job moves while an operator looks is
-- never taken for an orphan.
--
-- KEYS[1] = the lock key
-- ARGV[1] = the holder jid the caller saw (the lock is kept if it changed)
-- ARGV[2] = the queues set, ARGV[3] = the queue key prefix
-- ARGV[4] = the in-progress identities set, ARGV[5] = the in-progress prefix
-- ARGV[6] = the processes set, ARGV[7] = the workers-hash prefix
-- ARGV[8..] = the other keys that hold jobs: schedule, retry, unsettled,
--   repeat orphans (sorted sets or lists)
-- Returns 1 when deleted, 0 when the holder was found (or the lock changed).
-- The search is by the jid's text (24 hex chars) in each entry: a chance
-- match keeps a lock, never deletes one. Costs a scan of every job: an
-- operator's tool, not a hot path. Keys are built from prefixes (not KEYS).

local jid = ARGV[1]
if redis.call("GET", KEYS[1]) ~= jid then
  return 0
end

local function in_entries(entries)
  for _, entry in ipairs(entries) do
    if string.find(entry, jid, 1, true) then
      return true
    end
  end
  return false
end

local function in_key(key)
  local kind = redis.call("TYPE", key)["ok"]
  if kind == "list" then
    return in_entries(redis.call("LRANGE", key, 0, -1))
  elseif kind == "zset" then
    return in_entries(redis.call("ZRANGE", key, 0, -1))
  elseif kind == "hash" then
    return in_entries(redis.call("HVALS", key))
  end
  return false
end

for i = 8, #ARGV do
  if in_key(ARGV[i]) then
    return 0
  end
end
for _, name in ipairs(redis.call("SMEMBERS", ARGV[2])) do
  if in_key(ARGV[3] .. name) then
    return 0
  end
end
for _, identity in ipairs(redis.call("SMEMBERS", ARGV[4])) do
  if in_key(ARGV[5] .. identity) then
    return 0
  end
end
for _, identity in ipairs(redis.call("SMEMBERS", ARGV[6])) do
  if in_key(ARGV[7] .. identity) then
    return 0
  end
end
redis.call("DEL", KEYS[1])
return 1
