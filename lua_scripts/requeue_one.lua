-- requeue_one: puts one job from an in-progress list back on its queue, if it
-- is still on the list (giving a job back; requeueing a stray).
--
-- KEYS[1] = the in-progress list
-- ARGV[1] = the job exactly as fetched
-- ARGV[2] = queue key prefix, ARGV[3] = wake-up marker prefix
-- ARGV[4] = queue for a payload whose own queue can't be read
-- Returns 1 when requeued, 0 when it was no longer on the list.
-- Written before removed, in one step: never on neither, never on both after.
--- @include requeue_job

if not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return 0
end
requeue_job(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
redis.call("LREM", KEYS[1], 1, ARGV[1])
return 1
