-- fetch: acknowledges a batch of finished jobs and moves up to n new ones from
-- the queues into the in-progress list, in one atomic call.
-- Cluster: builds orphan-counter keys (ack_jobs, real_suspect) and wake-up markers from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
--
-- One call serves every processor of a process that settled or went idle at
-- the same moment: that is what lets one process run tens of thousands of
-- jobs a second (the cost is per round trip, not per job).
--
-- KEYS[1] = the process's in-progress list
-- KEYS[2] = the paused-queues set
-- KEYS[3] = stats:processed, KEYS[4] = stats:processed:<today>
-- KEYS[5..] = queue keys, in the order to try (shuffled by weight by the caller)
-- ARGV[1] = "reliable" (moved into in-progress) or "basic" (popped: at most once)
-- ARGV[2] = n, the most jobs to take
-- ARGV[3] = orphan-counter key prefix, ARGV[4] = wake-up marker key prefix
-- ARGV[5] = per-day stat TTL (s)
-- ARGV[6] = "1" when a suspect may be taken, "0" when the caller declines them
--   (it just gave one back: it could not get the process to itself in time)
-- ARGV[7] = the acks' history groups, ARGV[8] = their tags ("", "": history
--   off; see includes/history.lua)
-- ARGV[9] = number of acks a; ARGV[10..9+a] = the finished jobs, as fetched
-- ARGV[10+a] = number of lock releases r, then r triples (ack position, lock
--   key, jid): the unique lock or periodic running lock a finished job holds,
--   released with its ack (see ack_jobs' release_acked)
-- ARGV[11+a+3r..] = the queue names matching KEYS[5..]
-- Returns {jobs taken (raw, in the order taken), positions of acks whose job
-- was already gone, names of queues skipped because their key has the wrong type,
-- sources: a queue name and how many of the jobs taken came from it, in the
-- order taken (the caller knows each job's queue; a payload may name another)}.
-- Atomic: a job is on its queue or on the in-progress list, never neither.
--
-- Suspects (jobs requeue.lua marked after orphaning them more than once) run
-- alone: one is taken only as the first job of a call that accepts them, and
-- the call then ends. A suspect met later, or in a call that declines them,
-- is left where it is at the front of its queue and that queue is skipped —
-- the other queues are still served, in strict order too. A mark counts only
-- beside the job's orphan counter >= 1 (real_suspect): a producer can write
-- the text, not the counter, so a forged mark is cut off and the job taken as
-- a plain one. Only a job whose third byte is "s" is looked at twice.
--- @include ack_jobs
--- @include history

local missing, acked = ack_jobs(KEYS[1], ARGV[3], 10, ARGV[1] == "reliable")
local names_at = release_acked(10 + acked, missing, ARGV[1] == "reliable")
-- Only what this call removed: an ack resent after a lost reply counts once.
count_processed(KEYS[3], KEYS[4], acked - #missing, tonumber(ARGV[5]))
count_runs(ARGV[7], ARGV[8], missing)

local reliable = ARGV[1] == "reliable"
local wanted = tonumber(ARGV[2])
local suspects_ok = ARGV[6] == "1"
local counter_prefix = ARGV[3]
local taken, broken, sources = {}, {}, {}
local alone = false -- a suspect was taken: nothing else goes with it
for i = 5, #KEYS do
  if wanted <= #taken or alone then
    break
  end
  local name = ARGV[names_at + i - 5]
  if redis.call("SISMEMBER", KEYS[2], name) == 0 then
    -- A batch from the tail (where jobs are taken from) in three commands,
    -- not one LMOVE per job: the per-command cost inside a script is most of
    -- what a fetch costs Redis. pcall: a queue key of the wrong type is
    -- skipped and reported, never allowed to abort the call after other
    -- queues' jobs were moved.
    local ok, batch = pcall(redis.call, "LRANGE", KEYS[i], -(wanted - #taken), -1)
    if not ok then
      broken[#broken + 1] = name
    else
      local first = #taken + 1
      local skipped = false -- a suspect left at this queue's front
      for j = #batch, 1, -1 do
        local job = batch[j]
        if is_suspect(job) then
          local real
          real, job = real_suspect(job, counter_prefix)
          if real then
            if #taken == 0 and suspects_ok then
              taken[1] = job
              alone = true
            else
              skipped = true
            end
            break
          end
        end
        taken[#taken + 1] = job
      end
      local moved = #taken - first + 1
      if moved > 0 then
        -- Written before removed: a script stopped between the two keeps the
        -- jobs on both lists (a stray, requeued later), never on neither.
        -- LPUSH of the jobs in the order taken leaves the list as that many
        -- LMOVE RIGHT LEFT would: the newest fetch at the head.
        if reliable then
          redis.call("LPUSH", KEYS[1], unpack(taken, first, #taken))
        end
        redis.call("LTRIM", KEYS[i], 0, -(moved + 1))
        sources[#sources + 1] = name
        sources[#sources + 1] = moved
      end
      -- Filled up with work still waiting, or a suspect left for a process
      -- with nothing else to run: wake another idle process for it. Not when
      -- this caller declines suspects: it would only wake itself, in a loop.
      if (#taken >= wanted or alone or (skipped and suspects_ok))
          and redis.call("LLEN", KEYS[i]) > 0 then
        redis.pcall("ZADD", ARGV[4] .. name, 0, "1")
      end
    end
  end
end
return {taken, missing, broken, sources}
