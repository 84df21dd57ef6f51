-- batch_close: closes an open batch (its `async with` block ended): from now
-- on the step that ends its last member settles it. A batch whose members
-- all ended while it was open (or that has none) is settled here, its
-- callbacks pushed in this step (includes/batch_end.lua).
--
-- KEYS[1] = the batch's hash
-- ARGV: none
-- Returns the batch's state afterwards ("running" or "done"); "" when the
-- batch is gone; a batch already closed is left as it is (its state returned).
-- Why atomic: "open -> running" and "nothing pending -> done" must be one
-- step, or a member ending between them would find the batch open (no
-- callback) and the close would find it pending (no callback): stuck.

--- @include batch_end

local state = redis.call("HGET", KEYS[1], "state")
if not state then
  return ""
end
if state == "open" then
  redis.call("HSET", KEYS[1], "state", "running", "closed_at", batch_now())
  batch_settle(KEYS[1], nil, nil)
end
return redis.call("HGET", KEYS[1], "state")
