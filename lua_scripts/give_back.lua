-- give_back: puts jobs from an in-progress list back on their queues, those
-- still on the list, in the order given (giving jobs back; requeueing strays);
-- or, in basic fetch (no list: the jobs are held in the caller's memory only),
-- every job given, once per call.
-- Cluster: builds queue keys and wake-up markers (requeue_job) from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
--
-- KEYS[1] = the in-progress list
-- KEYS[2] = (basic fetch only) this call's once-marker. With no list, nothing
--   else says whether a call whose reply was lost ran: the first call writes
--   the marker (its result, kept a day) and a repeat of it moves nothing and
--   returns that result, so a job is never pushed twice. Absent: the jobs are
--   on KEYS[1], and only those still listed are moved (a repeat finds none).
-- ARGV[1] = queue key prefix, ARGV[2] = wake-up marker prefix
-- ARGV[3] = queue for a payload whose own queue can't be read
-- ARGV[4] = n, the number of jobs
-- ARGV[5 .. 4+n] = the jobs, exactly as fetched; each goes onto the end its
-- queue is popped from, so the last one given runs first: give the newest
-- first to keep their order.
-- ARGV[5+n .. 4+2n] = for each job, the queue it was fetched from, or "" when
-- unknown (then the queue its payload names): a job goes back where it came
-- from, whatever its payload says.
-- ARGV[5+2n] = (optional) the kinds of hold a payload names (holds/encoding.py
-- kinds_table, JSON; includes/holds.lua): each job's holds are settled on its
-- way back as the "shutdown_requeue" rule says (an overlap=False entry's
-- running lock kept, a unique lock left; see requeue_job); absent: none minded
-- Returns {given, kept}: how many were put back, and the 1-based positions
-- (among the n jobs) of jobs whose queue refused the write (a key of the
-- wrong type): they stay on the list (basic fetch: in the caller's memory),
-- still the caller's. The rest were no longer listed (another process's
-- requeue had moved them).
-- Atomic, and each job written before it is removed: one call is never
-- interleaved with a fetch (the jobs keep their place ahead of the queue's
-- others), and a job is never on neither list, nor on both afterwards.
--- @include requeue_job

local n = tonumber(ARGV[4])
local kinds = decode_kinds(ARGV[5 + 2 * n])
local once = KEYS[2]
if once then
  local done = redis.call("GET", once)
  if done then
    -- "given|p1,p2,...": what the first call of this give back did.
    local given_text, kept_text = string.match(done, "^(%d+)|(.*)$")
    local kept = {}
    for position in string.gmatch(kept_text or "", "%d+") do
      kept[#kept + 1] = tonumber(position)
    end
    return {tonumber(given_text) or 0, kept}
  end
end
local given, kept = 0, {}
for i = 1, n do
  local job = ARGV[4 + i]
  if once or redis.call("LPOS", KEYS[1], job) then
    if pcall(requeue_job, job, ARGV[1], ARGV[2], ARGV[3], ARGV[4 + n + i], kinds,
      "shutdown_requeue") then
      if not once then
        redis.call("LREM", KEYS[1], 1, job)
      end
      given = given + 1
    else
      kept[#kept + 1] = i
    end
  end
end
if once then
  redis.call("SET", once, given .. "|" .. table.concat(kept, ","), "EX", 86400)
end
return {given, kept}
