-- release_owned(at): the optional release block of the ack path. ARGV[at] = r
-- (absent counts as 0), ARGV[at+1 .. at+2r] = r pairs (key, owner): each key is
-- deleted if it still holds that owner (an overlap=False periodic entry's
-- running lock, released by its run's ack in the same step). Returns how many
-- ARGV slots the block used (1 + 2r; 1 when absent).
-- The caller lists a key only for a job that holds one: a plain job's ack adds
-- nothing but the "0" of the whole call. pcall: a key of the wrong type never
-- fails the acks around it.
local function release_owned(at)
  local r = tonumber(ARGV[at] or "0") or 0
  for i = 1, r do
    local key, owner = ARGV[at + 2 * i - 1], ARGV[at + 2 * i]
    local holder = redis.pcall("GET", key)
    if holder == owner then
      redis.pcall("DEL", key)
    end
  end
  return 1 + 2 * r
end
