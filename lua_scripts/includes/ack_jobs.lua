--- @include holds

-- ack_jobs(in_progress, counter_prefix, first, listed): acknowledges finished jobs
-- (listed = false in basic mode: there is no in-progress list, only counting).
-- Cluster: builds orphan-counter keys (counter_prefix .. jid) from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
--
-- ARGV[first - 1] = count; ARGV[first .. first + count - 1] = the finished jobs,
-- each exactly as fetched; then the holds block (settle_acked_holds, below).
-- Each job is removed from the in-progress list and, if it carries the suspect
-- mark (requeue.lua marks a job it recovered from a dead process a second
-- time), its orphan counter is deleted: it got to finish, so whatever crashes
-- it sat through are behind it. A plain job's counter (orphaned once, then
-- requeued unmarked) is not looked for: it expires, and finding it would cost
-- every ack a decode.
-- Returns the 1-based positions of acks whose job was no longer on the list
-- (orphan recovery requeued it while it ran here: it may have run twice), and
-- the count.
--
-- Cost: the oldest fetches sit at the tail and processors mostly finish jobs
-- in the order they were fetched, so the acks, oldest first, usually are the
-- list's tail in order: they are compared in place (Lua compares strings by
-- pointer) and trimmed in one LTRIM. From the first one that differs on, each
-- is removed by one LREM (searched from the tail), or, WALK_FROM of them or
-- more, all in one walk of the list (of the tail already read, when they are
-- all there). Either way a duplicate payload loses its tail-most copy, as
-- LREM -1 would. No substring is made for a job that is not a suspect:
-- inside a script the cost is per string Lua creates, not per byte.
local function is_suspect(job)
  -- byte 3 of '{"suspect":' is "s" (115); a plain payload rarely has it there.
  return string.byte(job, 3) == 115 and string.sub(job, 1, 11) == '{"suspect":'
end

-- real_suspect(job, counter_prefix), for a job is_suspect says is marked:
-- true, job when it is a suspect indeed — its orphan counter, which only
-- requeue.lua writes (and only it marks), is >= 1. Else the mark was written
-- by a producer (or outlived its counter): false, and the job with a
-- `"suspect":1` mark cut off, to run as the plain job it is. Called only for
-- marked jobs: a plain job pays nothing for it.
local function real_suspect(job, counter_prefix)
  local ok, decoded = pcall(cjson.decode, job)
  if ok and type(decoded) == "table" and type(decoded["jid"]) == "string" then
    local count = redis.pcall("GET", counter_prefix .. decoded["jid"])
    if type(count) == "string" and (tonumber(count) or 0) >= 1 then
      return true, job
    end
  end
  if string.sub(job, 1, 13) == '{"suspect":1,' then
    return false, "{" .. string.sub(job, 14)
  elseif job == '{"suspect":1}' then
    return false, "{}"
  end
  return false, job
end

-- From this many acks out of the list's order on, they are removed in one walk
-- of the list (remove_in_one_walk) instead of one LREM each: every LREM is a
-- command (the per-command cost is most of what a script pays) and scans the
-- list from the tail; below it a few LREMs cost less than the walk's tables.
-- (300 acks, each pair of neighbours swapped: 1.9-3.1 -> 1.4-2.0 µs a job of
-- Redis; newest first: 6-12 -> 1.5-2.1; bench/ack_order.py, BENCHMARKS.md.)
local WALK_FROM = 24

-- walk(jobs, from, to, wanted, found, drop): marks in `drop` the jobs[to ..
-- from] (walked from `from` down, the tail-most first) still wanted, as many
-- times as each is wanted. Returns how many it marked.
local function walk(jobs, from, to, wanted, found, drop)
  local marked = 0
  for at = from, to, -1 do
    local job = jobs[at]
    local need = wanted[job]
    if need ~= nil and need > 0 then
      wanted[job] = need - 1
      found[job] = (found[job] or 0) + 1
      drop[at] = true
      marked = marked + 1
    end
  end
  return marked
end

-- rewrite(in_progress, jobs, size, top, drop, below, after): the list ends
-- with jobs[1 .. size] and then `below` more jobs, of which `after` are kept
-- (a table, maybe empty). It keeps its head down to jobs[top - 1] in place
-- (LTRIM: an end before the start removes them all) and gets the jobs below
-- that which are not dropped pushed back in their order (RPUSH).
local function rewrite(in_progress, jobs, size, top, drop, below, after)
  local kept = {}
  for at = top + 1, size do
    if not drop[at] then
      kept[#kept + 1] = jobs[at]
    end
  end
  for _, job in ipairs(after) do
    kept[#kept + 1] = job
  end
  redis.call("LTRIM", in_progress, 0, top - size - below - 2)
  for at = 1, #kept, 1000 do
    redis.call("RPUSH", in_progress, unpack(kept, at, math.min(at + 999, #kept)))
  end
end

-- mark_missing(first, from, count, found, missing): which acks found their
-- job — for a payload acked m times and found f times, its first f acks, as
-- m LREMs in ack order would — and the rest into `missing` (1-based).
local function mark_missing(first, from, count, found, missing)
  for i = from, count - 1 do
    local job = ARGV[first + i]
    local left = found[job]
    if left ~= nil and left > 0 then
      found[job] = left - 1
    else
      missing[#missing + 1] = i + 1
    end
  end
end

-- rewrite_region(in_progress, tail, region, drop): the list's tail region
-- (tail[1 .. region], the list's last jobs) without the dropped ones.
local function rewrite_region(in_progress, tail, region, drop)
  for at = 1, region do
    if drop[at] then
      return rewrite(in_progress, tail, region, at, drop, 0, {})
    end
  end
end

-- remove_in_one_walk(in_progress, first, from, count, missing, tail, region):
-- removes the acks ARGV[first + from .. first + count - 1] as that many
-- LREM -1 in ack order would, reading each job of the list at most once: a
-- payload acked m times loses its m tail-most copies, and an ack that finds
-- no copy left (the later ones of a payload, as LREM would find them) goes
-- into `missing` (1-based, in order). tail[1 .. region] is the list's tail
-- as read already (head first): it is walked first — acks a little out of
-- order (most of them) are all there. Fewer than WALK_FROM acks not found in
-- it (a job fetched later that finished early) are then looked for by one
-- LREM each, after the region is rewritten (so a payload's copies left are
-- all above it, where LREM -1 finds the tail-most); more, and the rest of the
-- list is read (one LRANGE) and walked too. The jobs left keep their order.
-- Each LTRIM is a write, so Redis lets the RPUSH after it run even out of
-- memory: a script never stops between the two.
local function remove_in_one_walk(in_progress, first, from, count, missing, tail, region)
  local wanted = {}
  for i = first + from, first + count - 1 do
    local job = ARGV[i]
    wanted[job] = (wanted[job] or 0) + 1
  end
  local found, drop = {}, {}
  local pending = count - from - walk(tail, region, 1, wanted, found, drop)
  if pending < WALK_FROM then
    rewrite_region(in_progress, tail, region, drop)
    if pending > 0 then
      for job, need in pairs(wanted) do
        for _ = 1, need do
          if redis.call("LREM", in_progress, -1, job) == 0 then
            break
          end
          found[job] = (found[job] or 0) + 1
        end
      end
    end
    return mark_missing(first, from, count, found, missing)
  end
  local rest, rest_drop = redis.call("LRANGE", in_progress, 0, -(region + 1)), {}
  walk(rest, #rest, 1, wanted, found, rest_drop)
  mark_missing(first, from, count, found, missing)
  for at = 1, #rest do
    if rest_drop[at] then
      local after = {}
      for i = 1, region do
        if not drop[i] then
          after[#after + 1] = tail[i]
        end
      end
      return rewrite(in_progress, rest, #rest, at, rest_drop, region, after)
    end
  end
  rewrite_region(in_progress, tail, region, drop)
end

local function ack_jobs(in_progress, counter_prefix, first, listed)
  local count = tonumber(ARGV[first - 1])
  local missing = {}
  if not listed or count == 0 then
    return missing, count
  end
  local tail = redis.call("LRANGE", in_progress, -count, -1)
  local last = #tail
  local trimmed = 0
  while trimmed < last and tail[last - trimmed] == ARGV[first + trimmed] do
    trimmed = trimmed + 1
  end
  if trimmed > 0 then
    redis.call("LTRIM", in_progress, 0, -(trimmed + 1))
  end
  if count - trimmed >= WALK_FROM then
    remove_in_one_walk(in_progress, first, trimmed, count, missing, tail, last - trimmed)
  else
    for i = trimmed, count - 1 do
      if redis.call("LREM", in_progress, -1, ARGV[first + i]) == 0 then
        missing[#missing + 1] = i + 1
      end
    end
  end
  for i = first, first + count - 1 do
    local job = ARGV[i]
    if is_suspect(job) then
      local ok, decoded = pcall(cjson.decode, job)
      if ok and type(decoded) == "table" and type(decoded["jid"]) == "string" then
        redis.call("DEL", counter_prefix .. decoded["jid"])
      end
    end
  end
  return missing, count
end

-- count_processed(total_key, day_key, n, day_ttl): bumps the processed totals.
-- Best effort (pcall): a corrupt counter must never fail the acks before it.
local function count_processed(total_key, day_key, n, day_ttl)
  if n > 0 then
    redis.pcall("INCRBY", total_key, n)
    redis.pcall("INCRBY", day_key, n)
    redis.pcall("EXPIRE", day_key, day_ttl)
  end
end

-- settle_acked_holds(at, missing, listed): the holds block at ARGV[at] (see
-- includes/holds.lua; position = the ack's 1-based place): what each finished
-- job holds, released (or kept) as its kinds' ack rule says, in the ack's own
-- step — unless that ack's job was missing (recovery requeued it: it runs
-- again and keeps, or has re-taken, its holds). Plain acks send 0. Returns the
-- index just past the block.
local function settle_acked_holds(at, missing, listed)
  local gone = nil
  if listed and #missing > 0 then
    gone = {}
    for _, position in ipairs(missing) do
      gone[position] = true
    end
  end
  return settle_holds(at, gone)
end

-- after_acked(counter_prefix, first, count, missing): the acked jobs that are
-- prerequisites of waiting jobs (after=[...]) succeeded, in the ack's own
-- step (includes/after_end.lua). Only while some job waits (one EXISTS a call,
-- nothing a job, otherwise); an ack whose job was missing is not a success
-- here (recovery requeued it: its next run's ack is). The after prefix is the
-- namespace's, read off the orphan-counter prefix ("<ns>:orphanings:").
local function after_acked(counter_prefix, first, count, missing)
  if count == 0 then
    return
  end
  local prefix = string.sub(counter_prefix, 1, #counter_prefix - #"orphanings:") .. "after:"
  if not after_on(prefix) then
    return
  end
  local gone = {}
  for _, position in ipairs(missing) do
    gone[position] = true
  end
  for i = 0, count - 1 do
    if not gone[i + 1] then
      after_job_end(prefix, ARGV[first + i], "succeeded")
    end
  end
end
