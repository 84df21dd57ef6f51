-- release_locks: releases holds (unique-job locks, periodic running locks,
-- ...), each only while its jid still holds it (owner-checked), in one call:
-- the worker coalesces the releases of the jobs that finished in the same
-- moment, and those it could not make in a settling step (handed over).
--
-- KEYS[i] = a hold's key; ARGV[i] = the jid that must hold KEYS[i]
-- ARGV[#KEYS + 1 ..] = the prefixes of the declared kinds of hold: a key
--   under none of them is not released (includes/holds.lua's prefix rule;
--   none given: nothing is)
-- Returns how many were released (a hold of another copy, or gone, is left
-- alone and not counted). Atomic: each check-and-delete sees no other writer
-- in between.

--- @include holds

local released = 0
for i = 1, #KEYS do
  for p = #KEYS + 1, #ARGV do
    if is_held_key(KEYS[i], ARGV[p]) then
      released = released + release_hold(ARGV[p], KEYS[i], ARGV[i])
      break
    end
  end
end
return released
