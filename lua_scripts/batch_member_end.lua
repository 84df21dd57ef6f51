-- batch_member_end: counts the ends of batch members outside a settling
-- script: a basic-fetch success, whose ack removes nothing and settles no
-- hold. The count itself is includes/batch_end.lua's, reached through the
-- holds include as every settling step reaches it: a member already counted
-- (a duplicate) counts nothing, and the last one's batch fires its callbacks
-- here, once.
--
-- KEYS[i] = the batch hash (<ns>:batch:<bid>) of the i-th hold below (they
--   route the call; the block names them again, checked against its prefix)
-- ARGV = one holds block (includes/holds.lua): n, then n groups of
--   (position, prefix, key, owner, "@<outcome>")
-- Returns 1.
-- Atomic: each member's count and its batch's settlement are one step.

--- @include holds

settle_holds(1, nil)
return 1
