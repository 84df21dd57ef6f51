-- release_locks: releases unique-job locks, each only while its jid still holds
-- it (owner-checked), in one call: the worker coalesces the releases of the
-- jobs that finished in the same moment.
--
-- KEYS[i] = a lock key; ARGV[i] = the jid that must hold KEYS[i]
-- Returns how many were released (a lock held by another copy, or gone, is
-- left alone and not counted). Atomic: each check-and-delete sees no other
-- writer in between.

--- @include release_unique

local released = 0
for i = 1, #KEYS do
  released = released + release_unique(KEYS[i], ARGV[i])
end
return released
