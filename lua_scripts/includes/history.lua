-- The metrics history (see cogworker_async/observability/history.py): jobs
-- counted per minute and per job name in the same call that settles them.
-- Cluster: builds the history keys from a prefix inside Lua (<prefix><minute>); the prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
-- Every write is best effort (pcall): a history key of the wrong type must
-- never fail the acks or the filing beside it.
--
-- count_runs(groups, tags, missing): counts one call's acknowledged runs.
--   groups = "" (history off) or JSON {"p": key prefix, "t": ttl (s),
--     "g": [[minute, name, runs, run_us, bucket, count, bucket, count, ...], ...]}
--     (minute as a string: the key is <prefix><minute>)
--   tags = for n acks, little-endian: n groups (u16, 1-based; 0 = not counted
--     per name), then n buckets (u8), then n run times (double, us)
--   missing = positions of acks whose job was already gone (ack_jobs): their
--     runs are taken back out, so an ack resent after a lost reply counts once.
-- Writes per group: HINCRBY <name>|h<bucket> (one per bucket met) and
-- <name>|us, and EXPIRE only when a field was created. Nothing per job.
-- Runs and the totals are sums read back: runs = histogram + failures.
local function count_runs(groups, tags, missing)
  if groups == "" then
    return
  end
  local ok, h = pcall(cjson.decode, groups)
  if not ok or type(h) ~= "table" then
    return
  end
  local minus = {}
  local n = #tags / 11
  for _, pos in ipairs(missing) do
    local ok_tag, g, b, us = pcall(function()
      return struct.unpack("<H", tags, 2 * (pos - 1) + 1),
        struct.unpack("<B", tags, 2 * n + pos),
        struct.unpack("<d", tags, 3 * n + 8 * (pos - 1) + 1)
    end)
    if ok_tag and g > 0 then
      local m = minus[g]
      if not m then
        m = {us = 0, buckets = {}}
        minus[g] = m
      end
      m.us = m.us + us
      m.buckets[b] = (m.buckets[b] or 0) + 1
    end
  end
  local ttl = h["t"]
  for i, group in ipairs(h["g"]) do
    local m = minus[i]
    local us = group[4]
    if m then
      us = us - m.us
    end
    local key = h["p"] .. group[1]
    local name = group[2]
    -- A field just created (its new value is what was added) may be the
    -- key's first: set its TTL then, not on every call.
    local fresh = false
    for j = 5, #group - 1, 2 do
      local count = group[j + 1]
      if m then
        count = count - (m.buckets[group[j]] or 0)
      end
      if count > 0 then
        fresh = redis.pcall("HINCRBY", key, name .. "|h" .. group[j], count) == count or fresh
      end
    end
    if us > 0 then
      redis.pcall("HINCRBY", key, name .. "|us", us)
    end
    if fresh then
      redis.pcall("EXPIRE", key, ttl)
    end
  end
end

-- count_failure(key, name, ttl): one failed job (file.lua), in its minute's
-- hash `key` ("" = history off); `name` = "" when it has none (unparseable).
local function count_failure(key, name, ttl)
  if key == "" then
    return
  end
  if redis.pcall("HINCRBY", key, name .. "|f", 1) == 1 then
    redis.pcall("EXPIRE", key, ttl)
  end
end
