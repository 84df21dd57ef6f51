-- release_unique(key, jid): deletes a unique-job lock only while `jid` holds it
-- (owner-checked: a newer copy's lock, taken after this one's ran out or was
-- released, is never touched). Returns 1 when released, else 0.
-- Callers pass the lock as an optional ARGV block: an empty or missing key (a
-- job without `unique`) costs one comparison.
local function release_unique(key, jid)
  if key == nil or key == "" or jid == nil or jid == "" then
    return 0
  end
  if redis.call("GET", key) == jid then
    return redis.call("DEL", key)
  end
  return 0
end

-- release_unique_of(entry): the lock a job's payload names in its `unique`
-- field ({"key": ..., ...}), released if the job's jid still holds it. Only an
-- entry whose text mentions "unique" is decoded: plain jobs pay a substring
-- search. (The key comes from the payload, not KEYS: like the orphan counters.)
local function release_unique_of(entry)
  if not string.find(entry, '"unique"', 1, true) then
    return 0
  end
  local ok, job = pcall(cjson.decode, entry)
  if not ok or type(job) ~= "table" or type(job["unique"]) ~= "table" then
    return 0
  end
  local key, jid = job["unique"]["key"], job["jid"]
  if type(key) ~= "string" or type(jid) ~= "string" then
    return 0
  end
  return release_unique(key, jid)
end
