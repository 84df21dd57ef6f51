-- overdue: the identities orphan recovery has to judge this pass, and no
-- others, so a pass costs O(overdue identities), not O(fleet).
--
-- KEYS[1] = beats sorted set (identity -> last beat, Redis's clock)
-- KEYS[2] = processes set, KEYS[3] = in_progress_identities set
-- ARGV[1] = orphan_threshold (s), ARGV[2] = the caller's clock (epoch s),
--           used only if TIME is refused
-- Returns {identities whose last beat is at least orphan_threshold old...,
--          registered identities with no entry in beats...}; may repeat one.
--
-- Only a candidate list: the verdict stays requeue.lua's (presence, the
-- last_beat hash, the judge rule), so a candidate read here that beats again
-- meanwhile is found alive there. What this must never do is leave a dead
-- identity out. Hence the second part: an identity registered without a
-- beats entry (a process of a version that predates the index, in a rolling
-- deploy; an index lost or moved aside by the key guard) is always a
-- candidate. In one step so both parts read one instant on Redis's clock.
-- ZDIFF reads every registered identity once on the server (one command,
-- microseconds per thousand identities); no reply row per live one.

if redis.replicate_commands then redis.replicate_commands() end
local now = tonumber(ARGV[2])
local ok, time = pcall(redis.call, "TIME")
if ok then
  now = tonumber(time[1]) + tonumber(time[2]) / 1000000
end
local due = redis.pcall("ZRANGEBYSCORE", KEYS[1], "-inf", now - tonumber(ARGV[1]))
if type(due) ~= "table" or due["err"] then
  -- The index is unusable (wrong type): every registered identity is a candidate.
  return redis.call("SUNION", KEYS[2], KEYS[3])
end
for _, registry in ipairs({KEYS[2], KEYS[3]}) do
  local unbeaten = redis.pcall("ZDIFF", 2, registry, KEYS[1])
  -- A wrong-typed registry is skipped here: the key guard moves it aside.
  if type(unbeaten) == "table" and not unbeaten["err"] then
    for _, identity in ipairs(unbeaten) do due[#due + 1] = identity end
  end
end
return due
