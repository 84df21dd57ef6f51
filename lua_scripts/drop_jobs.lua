-- drop_jobs: an operator removes jobs that will then never run (delete from
-- schedule/retry/dead, delete-all, clear a queue) and, in the same step,
-- releases the unique-job lock each one removed still holds (owner-checked).
--
-- KEYS[1] = the sorted set (schedule, retry, dead) or the queue list
-- ARGV[1] = "zrem": ARGV[2..] are the exact entries to remove from the set
--           "zpop": ARGV[2] = how many to pop, lowest score first
--           "rpop": ARGV[2] = how many to pop from the list's tail (oldest)
-- Returns how many entries were removed. A key of the wrong type is an error
-- (WRONGTYPE) before anything is removed: bad data stays for a human.
-- Plain jobs pay a substring search each (release_unique_of).

--- @include release_unique

local mode, removed = ARGV[1], {}
if mode == "zrem" then
  for i = 2, #ARGV do
    if redis.call("ZREM", KEYS[1], ARGV[i]) == 1 then
      removed[#removed + 1] = ARGV[i]
    end
  end
elseif mode == "zpop" then
  local popped = redis.call("ZPOPMIN", KEYS[1], tonumber(ARGV[2]))
  for i = 1, #popped, 2 do
    removed[#removed + 1] = popped[i]
  end
elseif mode == "rpop" then
  local popped = redis.call("RPOP", KEYS[1], tonumber(ARGV[2]))
  if popped then
    removed = popped
  end
else
  return redis.error_reply("drop_jobs: unknown mode " .. tostring(mode))
end
for _, entry in ipairs(removed) do
  release_unique_of(entry)
end
return #removed
