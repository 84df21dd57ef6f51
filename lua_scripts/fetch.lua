-- fetch: acknowledges a batch of finished jobs and moves up to n new ones from
-- the queues into the in-progress list, in one atomic call.
--
-- One call serves every processor of a process that settled or went idle at
-- the same moment: that is what lets one process run tens of thousands of
-- jobs a second (the cost is per round trip, not per job).
--
-- KEYS[1] = the process's in-progress list
-- KEYS[2] = the paused-queues set
-- KEYS[3] = stats:processed, KEYS[4] = stats:processed:<today>
-- KEYS[5..] = queue keys, in the order to try (shuffled by weight by the caller)
-- ARGV[1] = "reliable" (LMOVE into in-progress) or "basic" (RPOP: at most once)
-- ARGV[2] = n, the most jobs to take
-- ARGV[3] = orphan-counter key prefix, ARGV[4] = wake-up marker key prefix
-- ARGV[5] = per-day stat TTL (s)
-- ARGV[6] = number of acks a; ARGV[7..6+2a] = (job as fetched, jid) pairs
-- ARGV[7+2a..] = the queue names matching KEYS[5..]
-- Returns {jobs taken (raw, in the order taken), positions of acks whose job
-- was already gone, names of queues skipped because their key has the wrong type}.
-- Atomic: a job is on its queue or on the in-progress list, never neither.
--- @include ack_jobs

local missing, acked = ack_jobs(KEYS[1], ARGV[3], 7, ARGV[1] == "reliable")
-- Only what this call removed: an ack resent after a lost reply counts once.
count_processed(KEYS[3], KEYS[4], acked - #missing, tonumber(ARGV[5]))

local reliable = ARGV[1] == "reliable"
local wanted = tonumber(ARGV[2])
local names_at = 7 + 2 * acked
local taken, broken = {}, {}
-- A suspect (a job recovered from a dead process, marked by requeue.lua) is
-- always alone in its batch: the worker runs it with nothing else held, so
-- if it is what crashes processes, it takes no neighbour down with it.
local suspect_prefix = '{"suspect":'
local alone = false
for i = 5, #KEYS do
  if wanted <= #taken or alone then
    break
  end
  local name = ARGV[names_at + i - 5]
  if redis.call("SISMEMBER", KEYS[2], name) == 0 then
    while #taken < wanted do
      -- pcall: a queue key of the wrong type is skipped and reported, never
      -- allowed to abort the call after other queues' jobs were moved.
      local ok, job
      if reliable then
        ok, job = pcall(redis.call, "LMOVE", KEYS[i], KEYS[1], "RIGHT", "LEFT")
      else
        ok, job = pcall(redis.call, "RPOP", KEYS[i])
      end
      if not ok then
        broken[#broken + 1] = name
        break
      end
      if not job then
        break
      end
      if string.sub(job, 1, 11) == suspect_prefix then
        if #taken > 0 then
          -- Back where it was (reliable mode only has it on our list).
          if reliable then
            redis.call("LMOVE", KEYS[1], KEYS[i], "LEFT", "RIGHT")
          else
            redis.call("RPUSH", KEYS[i], job)
          end
        else
          taken[1] = job
        end
        alone = true
        break
      end
      taken[#taken + 1] = job
    end
    -- Filled up with work still waiting: wake another idle process for it.
    if (#taken >= wanted or alone) and redis.call("LLEN", KEYS[i]) > 0 then
      redis.pcall("ZADD", ARGV[4] .. name, 0, "1")
    end
  end
end
return {taken, missing, broken}
