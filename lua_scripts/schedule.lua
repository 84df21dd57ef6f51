-- schedule: adds jobs to the schedule set (delay / at) and wakes a scheduled
-- poller when one of them is due before everything already there.
--
-- KEYS[1] = the schedule sorted set, KEYS[2] = the scheduled poller's wake-up
-- marker (a sorted set pollers block on with BZPOPMIN)
-- ARGV = pairs: score (epoch s due), job payload (JSON); at least one pair
-- Returns how many entries were added (ZADD's reply).
-- Why one script: the "is it the earliest?" check must see the set as the
-- ZADD left it, or two producers could each think the other's entry earlier
-- and neither wake the poller. Producers in other languages may ZADD the
-- schedule set alone: the poller finds their entries at its next interval
-- poll (`scheduled_poll_interval`).

--- @include wake_poller

local added = redis.call("ZADD", KEYS[1], unpack(ARGV))
local earliest = tonumber(ARGV[1])
for i = 3, #ARGV, 2 do
  local score = tonumber(ARGV[i])
  if score < earliest then
    earliest = score
  end
end
wake_poller(KEYS[1], KEYS[2], earliest)
return added
