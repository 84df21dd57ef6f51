-- The running lock of an overlap=False periodic entry (<ns>:periodic:running:<name>),
-- whose value is the jid of the run that holds it. The lock is found from the
-- job itself: its payload carries `periodic_until_executed: true`,
-- `periodic_pjid` (the entry's name) and `periodic_queued_ttl` (seconds).
-- Every change is owner-checked: a run never touches a lock a newer run took
-- after its own had expired.
--
-- Only the scripts off the hot path (requeue, give back, burial, filing of an
-- unsettled record) look inside payloads, and only a payload that names the
-- field at all is decoded; the ack and file paths get the lock from the caller
-- in an optional block instead, so a plain job costs them nothing.

-- running_lock_of(job, lock_prefix): the lock key, the jid and the queued TTL
-- (ms, or nil) of a job of an overlap=False entry; nil for any other job, or
-- when lock_prefix is empty (the caller has no periodic entries to mind).
local function running_lock_of(job, lock_prefix)
  if type(lock_prefix) ~= "string" or lock_prefix == ""
      or not string.find(job, "periodic_until_executed", 1, true) then
    return nil
  end
  local ok, decoded = pcall(cjson.decode, job)
  if not ok or type(decoded) ~= "table" or decoded["periodic_until_executed"] ~= true then
    return nil
  end
  local name, jid = decoded["periodic_pjid"], decoded["jid"]
  if type(name) ~= "string" or name == "" or type(jid) ~= "string" then
    return nil
  end
  local ttl = tonumber(decoded["periodic_queued_ttl"])
  return lock_prefix .. name, jid, ttl and math.floor(ttl * 1000) or nil
end

-- retake_running_lock(key, jid, ttl_ms): the run `jid` holds the lock again for
-- ttl_ms, when the lock is free (its TTL ran out) or already its own. Another
-- run's lock is left alone (returns false).
local function retake_running_lock(key, jid, ttl_ms)
  local holder = redis.call("GET", key)
  if holder and holder ~= jid then
    return false
  end
  redis.call("SET", key, jid, "PX", math.max(1, math.floor(ttl_ms)))
  return true
end

-- release_running_lock(key, jid): deletes the lock if `jid` holds it.
local function release_running_lock(key, jid)
  if redis.call("GET", key) == jid then
    redis.call("DEL", key)
    return true
  end
  return false
end

-- retake_for(job, lock_prefix, default_ttl_ms) / release_for(job, lock_prefix):
-- the same, from a payload (nothing for a job of no overlap=False entry).
-- pcall: a lock key of the wrong type never fails the move around it.
local function retake_for(job, lock_prefix, default_ttl_ms)
  local key, jid, ttl = running_lock_of(job, lock_prefix)
  if key then
    pcall(retake_running_lock, key, jid, ttl or tonumber(default_ttl_ms) or 3600000)
  end
end

local function release_for(job, lock_prefix)
  local key, jid = running_lock_of(job, lock_prefix)
  if key then
    pcall(release_running_lock, key, jid)
  end
end
