-- give_back: puts jobs from an in-progress list back on their queues, those
-- still on the list, in the order given (giving jobs back; requeueing strays).
-- Cluster: builds queue keys and wake-up markers (requeue_job) from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
--
-- KEYS[1] = the in-progress list
-- ARGV[1] = queue key prefix, ARGV[2] = wake-up marker prefix
-- ARGV[3] = queue for a payload whose own queue can't be read
-- ARGV[4] = n, the number of jobs
-- ARGV[5 .. 4+n] = the jobs, exactly as fetched; each goes onto the end its
-- queue is popped from, so the last one given runs first: give the newest
-- first to keep their order.
-- ARGV[5+n .. 4+2n] = for each job, the queue it was fetched from, or "" when
-- unknown (then the queue its payload names): a job goes back where it came
-- from, whatever its payload says.
-- ARGV[5+2n] = (optional) the periodic running-lock prefix: a job of an
-- overlap=False entry re-takes its lock on the way back (see requeue_job)
-- Returns {given, kept}: how many were put back, and the 1-based positions
-- (among the n jobs) of jobs whose queue refused the write (a key of the
-- wrong type): they stay on the list, still the caller's. The rest were no
-- longer listed (another process's requeue had moved them).
-- Atomic, and each job written before it is removed: one call is never
-- interleaved with a fetch (the jobs keep their place ahead of the queue's
-- others), and a job is never on neither list, nor on both afterwards.
--- @include requeue_job

local n = tonumber(ARGV[4])
local given, kept = 0, {}
for i = 1, n do
  local job = ARGV[4 + i]
  if redis.call("LPOS", KEYS[1], job) then
    if pcall(requeue_job, job, ARGV[1], ARGV[2], ARGV[3], ARGV[4 + n + i],
      ARGV[5 + 2 * n]) then
      redis.call("LREM", KEYS[1], 1, job)
      given = given + 1
    else
      kept[#kept + 1] = i
    end
  end
end
return {given, kept}
