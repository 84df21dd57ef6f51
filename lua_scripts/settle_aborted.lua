-- settle_aborted: settles a job its process aborted (cancelled while running,
-- or its thread marked and returned): removes it from the in-progress list,
-- clears its orphan counter and counts it, in one atomic step. It is not
-- retried. Owner-checked like ack and file: a job no longer on the list
-- (recovery requeued it meanwhile) is left alone, so a job ends one way only.
--
-- KEYS[1] = the process's in-progress list, KEYS[2] = the job's orphan counter
-- KEYS[3] = stats:aborted, KEYS[4] = the tombstones (<ns>:aborted)
-- ARGV[1] = the job exactly as fetched, ARGV[2] = its jid, ARGV[3] = now (epoch s)
-- ARGV[4] = "1" when the job is on the in-progress list (reliable fetch), "0"
--   in basic fetch (no list: nothing to look for or remove)
-- ARGV[5] = number of holds h, then h groups of 5 (position, prefix, key,
--   owner, ttl): what the job holds (its unique lock, its overlap=False
--   periodic entry's running lock, ...), settled owner-checked in the same step
--   as each kind's abort rule says (includes/holds.lua; an aborted job is done
--   for good: released). A plain job sends 0.
-- Returns 1 when settled; 0 when the job was no longer on the list (then its
-- holds are kept: recovery requeued the job, which runs again and holds them).

--- @include holds

if ARGV[4] ~= "0" then
  if not redis.call("LPOS", KEYS[1], ARGV[1]) then
    return 0
  end
  redis.call("LREM", KEYS[1], -1, ARGV[1])
end
redis.pcall("DEL", KEYS[2])
redis.pcall("INCR", KEYS[3])
-- Kept (or put back, if pruned) so that a second abort answers "finished".
redis.pcall("ZADD", KEYS[4], "NX", ARGV[3], ARGV[2])
settle_holds(5, nil)
-- Jobs waiting on it (after=[...]) meet its end as a failure, here too (the
-- after prefix read off KEYS[4], "<ns>:aborted").
local after_prefix = string.sub(KEYS[4], 1, #KEYS[4] - #"aborted") .. "after:"
if after_on(after_prefix) then
  after_job_end(after_prefix, ARGV[1], "failed")
end
return 1
