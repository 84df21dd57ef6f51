-- drop_jobs: an operator removes jobs that will then never run (delete from
-- schedule/retry/dead, delete-all, clear a queue) and, in the same step,
-- settles what each one removed holds (its unique lock, its overlap=False
-- periodic entry's running lock, ...: released, owner-checked).
--
-- KEYS[1] = the sorted set (schedule, retry, dead), the queue list, or a
--           limit key's held jobs (mode "held")
-- ARGV[1] = "zrem": ARGV[5..] are the exact entries to remove from the set
--           "zpop": ARGV[5] = how many to pop, lowest score first
--           "rpop": ARGV[5] = how many to pop from the list's tail (oldest)
--           "held": KEYS[1] is a limit key's held jobs (<ns>:limits:~parked:<key>,
--           a list); ARGV[5] = a queue's name, ARGV[6] = a window's start (from
--           the head), ARGV[7] = its length: the window's jobs of that queue (a
--           payload without one: "default", as includes/holds.lua unpark reads
--           it) are removed, the others keep their places. Searched from the
--           head: a park (LPUSH) moves entries to higher indexes (a later window
--           may see one twice, never misses one); a release takes from the tail,
--           which moves none. Returns {removed, the next window's start, or -1
--           when the list ends}.
-- ARGV[2] = the kinds of hold a payload names (holds/encoding.py kinds_table, JSON;
--   "": holds not minded): each removed job's holds are settled as the
--   "operator_delete" rule says (includes/holds.lua); cluster: every kind's
--   prefix starts with the namespace, so with a hash tag its keys are in the
--   tag's slot, like KEYS
-- ARGV[3] = the tracking prefix (keys.tracking_prefix; "": none, as for the
--   dead set, whose jobs have ended already): a tracked job removed before it
--   ended says failed (JobDeleted) in its status and to its result waiters
--   (includes/job_end.lua)
-- ARGV[4] = now (epoch seconds): the status's finished_at
-- Returns how many entries were removed (mode "held": see there). A key of the
-- wrong type is an error (WRONGTYPE) before anything is removed: bad data
-- stays for a human. Atomic: a job is removed and what it holds settled in
-- one step, so no worker can take it (or unpark it) in between.
-- Plain jobs pay one substring search per kind of hold each
-- (settle_payload_holds), and with a tracking prefix one pattern match and
-- one EXISTS (record_end).

--- @include holds
--- @include job_end

local mode, removed = ARGV[1], {}
local kinds = decode_kinds(ARGV[2])
if mode == "zrem" then
  for i = 5, #ARGV do
    if redis.call("ZREM", KEYS[1], ARGV[i]) == 1 then
      removed[#removed + 1] = ARGV[i]
    end
  end
elseif mode == "zpop" then
  local popped = redis.call("ZPOPMIN", KEYS[1], tonumber(ARGV[5]))
  for i = 1, #popped, 2 do
    removed[#removed + 1] = popped[i]
  end
elseif mode == "rpop" then
  local popped = redis.call("RPOP", KEYS[1], tonumber(ARGV[5]))
  if popped then
    removed = popped
  end
elseif mode == "held" then
  local queue, start, window = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
  local entries = redis.call("LRANGE", KEYS[1], start, start + window - 1)
  -- A payload is a JSON object, so this marker is never a job: each removed
  -- one is overwritten with it in place, then all of them go in one LREM.
  local gone = "~dropped"
  for i, entry in ipairs(entries) do
    if string.find(entry, queue, 1, true) or queue == "default" then
      local ok, decoded = pcall(cjson.decode, entry)
      local named = ok and type(decoded) == "table" and decoded["queue"] or nil
      if type(named) ~= "string" or named == "" then
        named = "default"
      end
      if named == queue then
        redis.call("LSET", KEYS[1], start + i - 1, gone)
        removed[#removed + 1] = entry
      end
    end
  end
  if #removed > 0 then
    redis.call("LREM", KEYS[1], 0, gone)
  end
  local next_start = #entries < window and -1 or start + window - #removed
  for _, entry in ipairs(removed) do
    settle_payload_holds(entry, kinds, "operator_delete", false)
    if ARGV[3] ~= "" then
      pcall(record_end, entry, ARGV[3], "failed", "JobDeleted", "deleted by an operator", ARGV[4])
    end
  end
  return {#removed, next_start}
else
  return redis.error_reply("drop_jobs: unknown mode " .. tostring(mode))
end
for _, entry in ipairs(removed) do
  settle_payload_holds(entry, kinds, "operator_delete", false)
  if ARGV[3] ~= "" then
    pcall(record_end, entry, ARGV[3], "failed", "JobDeleted", "deleted by an operator", ARGV[4])
  end
end
return #removed
