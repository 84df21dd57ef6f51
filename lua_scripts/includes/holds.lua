-- The holds a job carries (cogworker_async/holds/): strings whose value is
-- the owning job's jid (a unique lock, a periodic entry's running lock, ...).
-- Every script that settles a job releases or keeps them here, in its own
-- atomic step, so a new kind of hold edits no script: the caller decides per
-- hold what the event does and sends one block,
--   ARGV[at] = n, then n groups of 5:
--   (position, prefix, key, owner, ttl)
-- position: which of the call's jobs holds it (an ack's 1-based place; 1
--   for a script that settles one job); prefix: the kind's key prefix, every
--   key of the kind starts with it; ttl: "" to release, else ms to keep.
-- A plain job sends n = 0: one argument, no table, nothing per job.
--
-- Every change is owner-checked (GET == owner): a claim a newer owner took
-- after this one's ran out is never touched. A key outside its kind's prefix
-- is refused (issue 21: the key comes from a payload, data anyone may have
-- written; only a key under a prefix of this namespace is written, and with a
-- hash-tagged namespace it is in the tag's slot, like KEYS).

--
-- A counted hold (a batch membership, holds/kinds.py HoldKind.outcomes) is not a
-- lock: its release counts how the member ended (includes/batch_end.lua). In
-- a block its ttl is "@<outcome>"; in the kinds table the kind has
-- "outcomes" (event -> outcome). The counted holds of many jobs of one call
-- under one key (an ack's members of one batch) may come as one group
-- (holds.py encode_calls): position "*p1,p2,...", owner "jid1,jid2,..."
-- (settle_counted_group); so may the released slots of one concurrency key
-- (ttl "": one SREM and one unpark for all of them).

--- @include batch_end
--- @include after_end

-- is_held_key(key, prefix): under `prefix`, with a name after it, and not a
-- bookkeeping key of the prefix (those start with "~", e.g. <ns>:unique:~releases).
-- An empty prefix admits nothing.
-- (find and byte, not sub: no string is made, on the path of every hold.)
local function is_held_key(key, prefix)
  return type(key) == "string" and type(prefix) == "string" and prefix ~= ""
    and #key > #prefix and string.find(key, prefix, 1, true) == 1
    and string.byte(key, #prefix + 1) ~= 126 -- "~"
end

-- A "member" kind (holds/kinds.py MEMBER_PREFIX_END): its prefix ends ":limits:",
-- its key is a set (a concurrency limit's running jobs) and the owner one
-- member of it. Told by the prefix alone: no TYPE call per hold.
local function is_member_prefix(prefix)
  return #prefix >= 8 and string.find(prefix, ":limits:", #prefix - 7, true) ~= nil
end

-- any_paused(prefix): whether some key of the prefix may be paused
-- (limits.BackOff): back_off.lua sets <prefix>~paused beside each pause, with
-- a TTL at least the pause's, so while it is absent no key is paused. Asked
-- once a call: a release or an admission then pays no command for the pause.
local paused_any = {}

local function any_paused(prefix)
  local seen = paused_any[prefix]
  if seen == nil then
    seen = redis.call("EXISTS", prefix .. "~paused") == 1
    paused_any[prefix] = seen
  end
  return seen
end

-- unpark(prefix, name, k): up to k of the oldest jobs parked on limit `name`
-- (the list <prefix>~parked:<name>, oldest at the tail) go back to the tail of
-- their queue (where the next is taken), the oldest last so it is taken
-- first, and wake an idle fetcher: a freed slot or a reopened window lets the
-- next held jobs in, in order. The queue and wake-up keys are built from the
-- namespace the prefix starts with (<ns>:limits:). Returns how many moved.
local function unpark(prefix, name, k)
  k = math.floor(tonumber(k) or 0)
  if k < 1 then
    return 0
  end
  local parked = prefix .. "~parked:" .. name
  -- A paused key (limits.BackOff) lets none in: limits_due.lua does when
  -- the pause ends.
  if any_paused(prefix) and redis.call("EXISTS", prefix .. "~pause:" .. name) == 1 then
    return 0
  end
  -- The oldest first, in one RPOP with a count (Redis 6.2; a server without
  -- it: one RPOP a job); one job (a slot's release): a plain RPOP.
  local jobs = nil
  local ok, got = true, nil
  if k > 1 then
    ok, got = pcall(redis.call, "RPOP", parked, k)
  end
  if ok and k > 1 then
    jobs = got
  else
    for _ = 1, k do
      local job = redis.call("RPOP", parked)
      if not job then
        break
      end
      jobs = jobs or {}
      jobs[#jobs + 1] = job
    end
  end
  if not jobs or #jobs == 0 then
    return 0
  end
  local ns = string.sub(prefix, 1, #prefix - #"limits:")
  local moved = 0
  for i = #jobs, 1, -1 do
    local ok, decoded = pcall(cjson.decode, jobs[i])
    local queue = ok and type(decoded) == "table" and decoded["queue"] or nil
    if type(queue) ~= "string" or queue == "" then
      queue = "default"
    end
    -- A queue key of the wrong type: the job stays held, back at the tail
    -- (its place), never popped and lost.
    if pcall(redis.call, "RPUSH", ns .. "queue:" .. queue, jobs[i]) then
      redis.pcall("ZADD", ns .. "wakeup:" .. queue, 0, "1")
      moved = moved + 1
    else
      redis.call("RPUSH", parked, jobs[i])
    end
  end
  return moved
end

local function unpark_one(prefix, name)
  return unpark(prefix, name, 1)
end

-- release_member(prefix, key, owner): `owner` leaves the set `key`; when it
-- was in it, the oldest job parked on that key is let back in (unpark_one).
-- Returns 1 when released, else 0.
local function release_member(prefix, key, owner)
  if redis.call("SREM", key, owner) == 0 then
    return 0
  end
  unpark_one(prefix, string.sub(key, #prefix + 1))
  return 1
end

-- release_members(prefix, key, owners): release_member for many owners of one
-- set in one SREM, then as many parked jobs let in as left (one unpark).
local function release_members(prefix, key, owners)
  local gone = redis.call("SREM", key, unpack(owners))
  unpark(prefix, string.sub(key, #prefix + 1), gone)
  return gone
end

-- release_hold(prefix, key, owner): deleted while `owner` holds it. Returns 1
-- when released, else 0.
local function release_hold(prefix, key, owner)
  if owner == nil or owner == "" or not is_held_key(key, prefix) then
    return 0
  end
  if is_member_prefix(prefix) then
    return release_member(prefix, key, owner)
  end
  if redis.call("GET", key) == owner then
    return redis.call("DEL", key)
  end
  return 0
end

-- keep_hold(prefix, key, owner, ttl_ms): held by `owner` for ttl_ms more, when
-- free (it ran out) or already its own; another owner's left alone. Returns 1
-- when held by `owner` afterwards, else 0.
local function keep_hold(prefix, key, owner, ttl_ms)
  if owner == nil or owner == "" or not is_held_key(key, prefix)
      or is_member_prefix(prefix) then
    return 0
  end
  local holder = redis.call("GET", key)
  if holder and holder ~= owner then
    return 0
  end
  redis.call("SET", key, owner, "PX", math.max(1, math.floor(ttl_ms)))
  return 1
end

-- settle_hold(prefix, key, owner, ttl): one group's change ("" ttl: release).
local function settle_hold(prefix, key, owner, ttl)
  local ms = tonumber(ttl)
  if ms then
    return keep_hold(prefix, key, owner, ms)
  end
  return release_hold(prefix, key, owner)
end

-- settle_counted_group(positions, prefix, key, owners, ttl, gone): one group
-- for the counted holds of many jobs of one call (an ack's members of one
-- batch): positions "*p1,p2,...", owners "jid1,jid2,..." (in the same order),
-- ttl "@<outcome>"; or, ttl "" under a member prefix, the released slots of
-- one concurrency key (release_members: one SREM, one unpark). One group on the wire instead of one per member: Redis
-- makes one string per member here, not five arguments. A position in `gone`
-- (its job's step did not happen) is left out.
local function settle_counted_group(positions, prefix, key, owners, ttl, gone)
  local slots = ttl == "" and is_member_prefix(prefix)
  if not is_held_key(key, prefix) or not (slots or string.byte(ttl, 1) == 64) then
    return
  end
  local members = {}
  if not gone and owners ~= "" and not string.find(owners, ",", 1, true) then
    members[1] = owners -- one owner (a key's one job in the call): no split
  elseif gone then
    local places = {}
    for p in string.gmatch(positions, "%d+") do
      places[#places + 1] = tonumber(p)
    end
    local n = 0
    for owner in string.gmatch(owners, "[^,]+") do
      n = n + 1
      if not gone[places[n]] then
        members[#members + 1] = owner
      end
    end
  else
    for owner in string.gmatch(owners, "[^,]+") do
      members[#members + 1] = owner
    end
  end
  if #members == 0 then
    return
  elseif slots then
    pcall(release_members, prefix, key, members)
  else
    pcall(batch_settle, key, members, string.sub(ttl, 2))
  end
end

-- settle_holds(at, gone): carries out the block at ARGV[at]; `gone` (a table
-- of positions, or nil) names jobs whose step did not happen (an ack whose job
-- recovery had requeued: it runs again and keeps its holds). pcall: a key of
-- the wrong type never fails the settlement around it. Returns the index just
-- past the block.
-- A counted hold's group (ttl "@<outcome>") is gathered by (key, outcome)
-- and settled after the loop, all of a batch's members in one batch_settle.
local function settle_holds(at, gone)
  local n = tonumber(ARGV[at]) or 0
  local last = at + 5 * n
  local counted, order = nil, nil
  local slots, slot_order = nil, nil -- released slots: set key -> owners
  -- The last counted group's (prefix, key, ttl) and members: an ack's members
  -- of one batch come in a row, and each then costs one comparison, not a
  -- key check and a concatenation.
  local last_prefix, last_key, last_ttl, last_members = nil, nil, nil, nil
  for i = at + 1, last, 5 do
    if string.byte(ARGV[i], 1) == 42 then -- "*": many members' counted holds
      settle_counted_group(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], gone)
    elseif not (gone and gone[tonumber(ARGV[i])]) then
      local prefix, key, owner, ttl = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
      if string.byte(ttl, 1) == 64 then -- "@": a counted hold
        if owner == "" then
          -- no owner: nothing to count
        elseif key == last_key and ttl == last_ttl and prefix == last_prefix then
          last_members[#last_members + 1] = owner
        elseif is_held_key(key, prefix) then
          counted = counted or {}
          order = order or {}
          local group = key .. "\0" .. ttl
          if not counted[group] then
            counted[group] = {key = key, outcome = string.sub(ttl, 2), members = {}}
            order[#order + 1] = group
          end
          local members = counted[group]["members"]
          members[#members + 1] = owner
          last_prefix, last_key, last_ttl, last_members = prefix, key, ttl, members
        end
      elseif ttl == "" and owner ~= "" and is_member_prefix(prefix) and is_held_key(key, prefix) then
        -- A slot's release: gathered per set, all of a key's owners in one
        -- SREM and one unpark after the loop (release_members).
        slots = slots or {}
        local owners = slots[key]
        if not owners then
          owners = {}
          slots[key] = owners
          slot_order = slot_order or {}
          slot_order[#slot_order + 1] = {prefix, key}
        end
        owners[#owners + 1] = owner
      else
        pcall(settle_hold, prefix, key, owner, ttl)
      end
    end
  end
  if slot_order then
    for _, at_key in ipairs(slot_order) do
      pcall(release_members, at_key[1], at_key[2], slots[at_key[2]])
    end
  end
  if order then
    for _, group in ipairs(order) do
      local g = counted[group]
      pcall(batch_settle, g["key"], g["members"], g["outcome"])
    end
  end
  return last + 1
end

-- The scripts that meet a job as its raw payload (recovery, give back,
-- burial, operator actions) read its holds from it, by the table of declared
-- kinds the caller passes (holds/encoding.py kinds_table, one JSON argument, decoded
-- once per call): per kind {mark, key, named, ttl, when, unless_started,
-- prefix, default_ttl, rules}. A payload is decoded only when its text contains some
-- kind's mark ('"unique"', '"periodic_pjid"', ...): a plain job pays one
-- substring search per kind.

-- field_at(t, path): t[path[1]][path[2]]..., nil where a step is no table.
local function field_at(t, path)
  local value = t
  for _, name in ipairs(path) do
    if type(value) ~= "table" then
      return nil
    end
    value = value[name]
  end
  return value
end

-- payload_holds(job, kind, started): the keys (a list), owner and TTL (ms, or
-- nil) of the holds of `kind` the decoded payload `job` names: one key, or
-- (kind "many") one per name of its list; nil when it names none. A key
-- outside the kind's prefix is left out. `started`: the job's run began, so a
-- hold it gave back as it started (unless_started: an until_executing unique
-- lock) is not its own any more; a waiting job still holds it.
local function payload_holds(job, kind, started)
  local owner = job["jid"]
  if type(owner) ~= "string" or owner == "" then
    return nil
  end
  if kind["when"] and field_at(job, kind["when"][1]) ~= kind["when"][2] then
    return nil
  end
  local gave_back = kind["unless_started"]
  if started and gave_back and field_at(job, gave_back[1]) == gave_back[2] then
    return nil
  end
  local found = field_at(job, kind["key"])
  local names = {found}
  if kind["many"] then
    names = type(found) == "table" and found or {}
  end
  local keys = {}
  for _, key in ipairs(names) do
    if type(key) == "string" and key ~= "" then
      if kind["named"] then
        key = kind["prefix"] .. key
      end
      if is_held_key(key, kind["prefix"]) then
        keys[#keys + 1] = key
      end
    end
  end
  if #keys == 0 then
    return nil
  end
  local ttl = kind["ttl"] and tonumber(field_at(job, kind["ttl"])) or nil
  if ttl and (ttl <= 0 or ttl ~= ttl or ttl == math.huge) then
    ttl = nil
  end
  return keys, owner, ttl and math.floor(ttl * 1000) or nil
end

-- settle_payload_holds(entry, kinds, event, started, wait_ms): every hold the
-- raw payload `entry` names, settled as its kind's rule for `event` (an Event
-- name of holds/kinds.py) says: released, kept for wait_ms (default 0) plus its TTL
-- (or the kind's default), or left. `started`: see payload_holds. `kinds` is
-- the decoded table; nil or empty settles nothing (a caller minding none).
local function settle_payload_holds(entry, kinds, event, started, wait_ms)
  if type(kinds) ~= "table" or type(entry) ~= "string" then
    return
  end
  local job = nil
  for _, kind in ipairs(kinds) do
    local rule = kind["rules"][event]
    if (rule == "release" or rule == "keep") and string.find(entry, kind["mark"], 1, true) then
      if job == nil then
        local ok, decoded = pcall(cjson.decode, entry)
        job = (ok and type(decoded) == "table") and decoded or false
      end
      if job then
        local keys, owner, ttl = payload_holds(job, kind, started)
        for _, key in ipairs(keys or {}) do
          if rule == "release" and kind["outcomes"] then
            pcall(batch_settle, key, owner, kind["outcomes"][event])
          elseif rule == "release" then
            pcall(release_hold, kind["prefix"], key, owner)
          else
            local ms = (tonumber(wait_ms) or 0) + (ttl or tonumber(kind["default_ttl"]))
            pcall(keep_hold, kind["prefix"], key, owner, ms)
          end
        end
      end
    end
  end
  -- A prerequisite of waiting jobs (after=[...]) ends here too: the kinds
  -- table names the after prefix (holds.kinds_table); looked at only while
  -- some job waits.
  if after_outcomes[event] then
    local after = after_prefix_in(kinds)
    if after and after_on(after) then
      after_job_end(after, entry, after_outcomes[event])
    end
  end
end

-- decode_kinds(text): the kinds table from its JSON argument; nil for ""/nil
-- (a caller that passes none: no holds minded).
local function decode_kinds(text)
  if type(text) ~= "string" or text == "" then
    return nil
  end
  return cjson.decode(text)
end
