-- wake_poller(set, marker, due): after an entry due at `due` (epoch s) was
-- added to `set` (the schedule or retry set), wakes a scheduled poller if that
-- entry is now the set's earliest.
--
-- A poller sleeps until the earliest due entry it has seen, so only a new
-- earliest one needs to tell it: a later one is found by the look that
-- follows the earlier one's move. The marker is a sorted set with one member
-- ("1") whose score is the earliest due time left there (`ZADD LT`); an idle
-- poller blocks on it with BZPOPMIN and plans its next look from the score.
-- Best effort (pcall): a marker of the wrong type never fails the caller,
-- and a poller finds the entry at its next interval poll anyway.
local function wake_poller(set, marker, due)
  local first = redis.pcall("ZRANGE", set, 0, 0, "WITHSCORES")
  if type(first) == "table" and first[2] ~= nil and tonumber(first[2]) < due then
    return
  end
  redis.pcall("ZADD", marker, "LT", due, "1")
end
