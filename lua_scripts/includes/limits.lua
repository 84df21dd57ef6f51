-- Rate and concurrency limits, checked where a job is taken (fetch.lua,
-- admit_taken.lua), in the same atomic step as the take: a job that names
-- limits runs only while every one of them has room; else it is parked, in
-- order, on the first full limit's list and never counts a retry.
--
-- A payload names its limits as "limits": [[kind, name, n, ...], ...]
-- (cogworker_async/limits): kind "concurrency": at most n jobs hold a slot in
-- the set <prefix><name> at once (the hold "limit_slot", holds.py: released by
-- every settling step, includes/holds.lua, which unparks the oldest parked
-- job of the key). <prefix>~config (a hash: name -> n), written by
-- `cogworker-async limits set`, overrides a payload's n. Parked jobs wait on
-- the list <prefix>~parked:<name>, the newest at the head.
--
-- A plain job pays one substring search ('"limits"'); a payload that is no
-- JSON object, or names no list of limits, is taken as a plain job.

--- @include holds

-- limit_of(prefix, name, n): the limit in force for `name`: the run-time one
-- (limits set), else the payload's.
local function limit_of(prefix, name, n)
  local set = tonumber(redis.call("HGET", prefix .. "~config", name))
  return set or n
end

-- check_job(job, prefix): admits or parks the raw `job`. Returns true when it
-- may run (its slots taken), false when it was parked.
local function check_job(job, prefix)
  local decoded = cjson.decode(job)
  local limits, jid = decoded["limits"], decoded["jid"]
  if type(limits) ~= "table" or type(jid) ~= "string" or jid == "" then
    return true
  end
  local slots = {}
  for _, limit in ipairs(limits) do
    local name, n = limit[2], tonumber(limit[3])
    if limit[1] == "concurrency" and type(name) == "string" and n
        and is_held_key(prefix .. name, prefix) then
      local key = prefix .. name
      -- Already a member: a job taken again (a requeue that found it running
      -- on) holds its slot once.
      if redis.call("SISMEMBER", key, jid) == 0 then
        if redis.call("SCARD", key) >= limit_of(prefix, name, n) then
          redis.call("LPUSH", prefix .. "~parked:" .. name, job)
          return false
        end
        slots[#slots + 1] = key
      end
    end
  end
  for _, key in ipairs(slots) do
    redis.call("SADD", key, jid)
  end
  return true
end

-- admit_job(job, prefix): check_job for a job that names limits (prefix ""
-- checks none). pcall: a key of the wrong type (not a limit's) never fails
-- the take around it: the job runs as a plain one.
local function admit_job(job, prefix)
  if prefix == nil or prefix == "" or not string.find(job, '"limits"', 1, true) then
    return true
  end
  local ok, admitted = pcall(check_job, job, prefix)
  return (not ok) or admitted
end
