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

-- unique_of(entry): the lock key, jid and TTL (s, or nil) a job's payload
-- names in its `unique` field ({"key": ..., "for": ...}); nil for any other
-- job. Only an entry whose text mentions "unique" is decoded: plain jobs pay a
-- substring search. (The key comes from the payload, not KEYS: like the
-- orphan counters; with a hash-tagged namespace it is in the tag's slot.)
local function unique_of(entry)
  if not string.find(entry, '"unique"', 1, true) then
    return nil
  end
  local ok, job = pcall(cjson.decode, entry)
  if not ok or type(job) ~= "table" or type(job["unique"]) ~= "table" then
    return nil
  end
  local key, jid = job["unique"]["key"], job["jid"]
  if type(key) ~= "string" or type(jid) ~= "string" then
    return nil
  end
  return key, jid, tonumber(job["unique"]["for"])
end

-- release_unique_of(entry): the lock a job's payload names, released if the
-- job's jid still holds it. Returns 1 when released, else 0.
local function release_unique_of(entry)
  local key, jid = unique_of(entry)
  if not key then
    return 0
  end
  return release_unique(key, jid)
end

-- retake_unique_of(entry): a job coming back to a queue by an operator's hand
-- (retry / enqueue now) holds its lock again while it waits, as it did when it
-- was enqueued: taken when free, its TTL renewed when the job still holds it,
-- left alone when a newer copy holds it (that copy's lock is not ours to take).
-- Returns 1 when held by this job afterwards, else 0.
local function retake_unique_of(entry)
  local key, jid, ttl = unique_of(entry)
  if not key or ttl == nil or ttl <= 0 then
    return 0
  end
  local holder = redis.call("GET", key)
  if holder and holder ~= jid then
    return 0
  end
  redis.call("SET", key, jid, "PX", math.max(1, math.floor(ttl * 1000)))
  return 1
end
