-- batch_abort: notes on a batch that it was aborted (client.abort_batch,
-- abort_flow), so a flow's next stage, which its end starts, does not run.
-- The members themselves are aborted one by one by the caller (abort_entry,
-- abort_running), each counted as it ends.
--
-- KEYS[1] = the batch's hash (<ns>:batch:<bid>)
-- ARGV: none
-- Returns 1 when noted, 0 when there is no such batch (nothing written: a
-- batch gone is not made again as a hash of one field).

if redis.call("EXISTS", KEYS[1]) == 0 then
  return 0
end
redis.call("HSET", KEYS[1], "aborted", "1")
return 1
