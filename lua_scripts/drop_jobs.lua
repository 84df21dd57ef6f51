-- drop_jobs: an operator removes jobs that will then never run (delete from
-- schedule/retry/dead, delete-all, clear a queue) and, in the same step,
-- releases the lock each one removed still holds (owner-checked): its unique
-- lock, or its overlap=False periodic entry's running lock.
--
-- KEYS[1] = the sorted set (schedule, retry, dead) or the queue list
-- ARGV[1] = "zrem": ARGV[3..] are the exact entries to remove from the set
--           "zpop": ARGV[3] = how many to pop, lowest score first
--           "rpop": ARGV[3] = how many to pop from the list's tail (oldest)
-- ARGV[2] = the periodic running-lock prefix ("": periodic locks not minded);
--   cluster: it starts with the namespace, so with a hash tag its keys are in
--   the tag's slot, like KEYS
-- Returns how many entries were removed. A key of the wrong type is an error
-- (WRONGTYPE) before anything is removed: bad data stays for a human.
-- Plain jobs pay two substring searches each (release_unique_of, release_for).

--- @include release_unique
--- @include running_lock

local mode, removed = ARGV[1], {}
if mode == "zrem" then
  for i = 3, #ARGV do
    if redis.call("ZREM", KEYS[1], ARGV[i]) == 1 then
      removed[#removed + 1] = ARGV[i]
    end
  end
elseif mode == "zpop" then
  local popped = redis.call("ZPOPMIN", KEYS[1], tonumber(ARGV[3]))
  for i = 1, #popped, 2 do
    removed[#removed + 1] = popped[i]
  end
elseif mode == "rpop" then
  local popped = redis.call("RPOP", KEYS[1], tonumber(ARGV[3]))
  if popped then
    removed = popped
  end
else
  return redis.error_reply("drop_jobs: unknown mode " .. tostring(mode))
end
for _, entry in ipairs(removed) do
  pcall(release_unique_of, entry)
  release_for(entry, ARGV[2])
end
return #removed
