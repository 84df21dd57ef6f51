-- Fair across keys (limits.fair, cogworker_async/limits): a queue serves the
-- keys of its fair jobs in turn, `weight` jobs of a key per turn, so a key
-- with a million jobs waiting never starves one with ten. Used by fetch.lua
-- only (it includes ack_jobs first: is_suspect).
--
-- A fair job is enqueued like any job (LPUSH onto its queue: every producer,
-- retry, requeue and recovery path stays as it is). The fetch moves the fair
-- jobs it meets at the queue's tail onto their key's line, and takes from the
-- lines by turns. Keys, for queue q under the limits prefix <p>
-- (keys.fair_base):
--   <p>~fair                 set before the first fair job is written (the
--                            flag: a namespace without it pays nothing)
--   <p>~fair:q               a hash: key -> weight (the latest job's),
--                            "~turn" -> jobs left in the turn of the ring's
--                            tail key, "~fed" -> the job last fed back
--   <p>~fair:q:~ring         a list of the keys with jobs waiting, the key
--                            whose turn it is at the tail
--   <p>~fair:q:<key>         the key's jobs, oldest at the tail
-- (queue names hold no ":" and keys never start with "~": no two collide).
-- A fair job's payload names "fair": [key, weight].
--
-- Atomic, as the fetch around it: a job is on its queue, on its key's line,
-- on the in-progress list, or parked by a limit; never two, never none.

-- fair_of(job): the key and weight of a fair job; nil for any other (a plain
-- job pays one substring search).
local function fair_of(job)
  if not string.find(job, '"fair"', 1, true) then
    return nil
  end
  local ok, decoded = pcall(cjson.decode, job)
  if not ok or type(decoded) ~= "table" or type(decoded["fair"]) ~= "table" then
    return nil
  end
  local key, weight = decoded["fair"][1], tonumber(decoded["fair"][2])
  if type(key) ~= "string" or key == "" or string.sub(key, 1, 1) == "~" or not weight then
    return nil
  end
  return key, math.max(1, math.min(1000, math.floor(weight)))
end

-- fair_line(base, job, key, weight): the job joins the end of its key's line;
-- a key that had no jobs waiting joins the ring's end, with the job's weight
-- (a key keeps the weight it joined with until its line is empty). A key of
-- the wrong type fails the call with the job on no line (the caller's pcall
-- then takes it as a plain one): the line's push fails before writing, and a
-- failed ring or weight write takes the job back off.
local function fair_line(base, job, key, weight)
  local line = base .. ":" .. key
  if redis.call("LPUSH", line, job) == 1 then
    if not pcall(redis.call, "LPUSH", base .. ":~ring", key)
        or not pcall(redis.call, "HSET", base, key, weight) then
      redis.call("LPOP", line)
      error("a fair key of the wrong type")
    end
  end
end

-- fair_scan(base, queue, budget, fed): moves the fair jobs at the tail of the
-- queue list onto their lines, up to `budget`, stopping at the first job that
-- is not (a plain job, a suspect: run alone as ever, the job fed back for a
-- blocking wait). So a key whose jobs came later is reached in a few calls,
-- not after the whole backlog ahead of it. Returns how many it moved.
local function fair_scan(base, queue, budget, fed)
  local moved, chunk, stop = 0, 16, false
  while not stop and moved < budget do
    local ok, batch = pcall(redis.call, "LRANGE", queue, -(moved + chunk), -(moved + 1))
    if not ok or #batch == 0 then
      break
    end
    local here = 0
    for j = #batch, 1, -1 do
      local job, key, weight = batch[j], nil, nil
      if job ~= fed and not is_suspect(job) then
        key, weight = fair_of(job)
      end
      if not key or not pcall(fair_line, base, job, key, weight) then
        stop = true
        break
      end
      here = here + 1
      if moved + here >= budget then
        break
      end
    end
    moved = moved + here
    stop = stop or #batch < chunk
    chunk = 128
  end
  if moved > 0 then
    redis.call("LTRIM", queue, 0, -(moved + 1))
  end
  return moved
end

-- turn_taken(base, ring, key, more, left, turn_kept): after jobs of the
-- ring's tail key were taken: a key with no more jobs leaves the ring; one
-- whose turn is used up (left 0) goes to the ring's head, the next key's turn
-- now; else its turn goes on in the next call ("~turn", kept only while one
-- is part way: turn_kept says there is one to clear).
local function turn_taken(base, ring, key, more, left, turn_kept)
  if not more then
    redis.call("RPOP", ring)
    redis.call("HDEL", base, key, "~turn")
  elseif left <= 0 then
    redis.call("LMOVE", ring, ring, "RIGHT", "LEFT")
    if turn_kept then
      redis.call("HDEL", base, "~turn")
    end
  else
    redis.call("HSET", base, "~turn", left)
  end
end

-- turn_of(base, key): the jobs left in the turn of the ring's tail key, and
-- whether a turn part way was kept for it.
local function turn_of(base, key)
  local got = redis.call("HMGET", base, "~turn", key)
  local kept = tonumber(got[1])
  return math.max(1, kept or tonumber(got[2]) or 1), kept ~= nil
end

-- fair_serve(base, room, limits_prefix, taken, pending): takes up to `room`
-- jobs by turns into `taken`, each admitted by its limits first (admit_job: a
-- job over one is parked instead, and counts in its key's turn). `pending`
-- (key -> jobs read off its line) gets each read before anything else is
-- written, so the caller, even after an error here, writes the taken jobs to
-- in-progress and then trims exactly those off the lines (written before
-- removed). Returns how many it took.
--
-- A pass reads the ring's next keys and their weights in two commands, gives
-- each its turn (an LRANGE of its line, one job more than the turn: whether
-- the line goes on), then updates the ring once: the keys served leave its
-- tail, those with jobs left go to its head in the order served; a key whose
-- turn the room cut short stays at the tail, its turn's rest in "~turn".
local function fair_serve(base, room, limits_prefix, taken, pending)
  local ring, got, read, passes = base .. ":~ring", 0, 0, 0
  -- Bounds: every pass takes or parks a job, or drops a key; a call parks at
  -- most 1,000 jobs more than it takes (the caller feeds the queue when lines
  -- are left, so a call cut short still wakes a process).
  while got < room and read < room + 1000 and passes < room + 1000 do
    passes = passes + 1
    local ring_keys = redis.call("LRANGE", ring, -math.min(room - got, 100), -1)
    if #ring_keys == 0 then
      break
    end
    local meta = redis.call("HMGET", base, "~turn", unpack(ring_keys))
    local kept = tonumber(meta[1])
    local served, again, gone, rest = 0, {}, {}, nil
    for i = #ring_keys, 1, -1 do -- the tail's turn first
      if got >= room then
        break
      end
      local key = ring_keys[i]
      local line = base .. ":" .. key
      local left = math.max(1, (i == #ring_keys and kept) or tonumber(meta[i + 1]) or 1)
      local skip, k = pending[key] or 0, math.min(left, room - got)
      local batch = redis.call("LRANGE", line, -(skip + k + 1), -(skip + 1))
      local more = #batch > k
      local last = more and 2 or 1
      pending[key] = skip + #batch - last + 1
      read = read + #batch - last + 1
      for j = #batch, last, -1 do
        if admit_job(batch[j], limits_prefix) then
          taken[#taken + 1] = batch[j]
          got = got + 1
        end
      end
      if not more then
        served = served + 1
        gone[#gone + 1] = key
      elseif left > #batch - last + 1 then
        rest = left - (#batch - last + 1) -- cut short by the room: stays at the tail
        break
      else
        served = served + 1
        again[#again + 1] = key
      end
    end
    if served > 0 then
      redis.call("LTRIM", ring, 0, -(served + 1))
      if #again > 0 then
        redis.call("LPUSH", ring, unpack(again))
      end
      if #gone > 0 then
        redis.call("HDEL", base, unpack(gone))
      end
    end
    if rest then
      redis.call("HSET", base, "~turn", rest)
    elseif kept then
      redis.call("HDEL", base, "~turn")
    end
  end
  return got
end

-- fair_feed(base, queue): when the queue list is empty and lines still wait
-- (the call was full, or cut short by its bounds), the next turn's job goes
-- onto the queue's tail: a process idle in a blocking wait on the list
-- (BLMOVE) is woken by it and takes it, as if it were the fetch's next; a
-- process that saw its fetch come back short waits so, and must be woken.
-- Returns true when it fed a job. Remembered as "~fed", so a fetch that meets it at
-- the tail takes it instead of putting it back in line.
local function fair_feed(base, queue)
  if redis.call("LLEN", queue) > 0 then
    return false
  end
  local ring = base .. ":~ring"
  local key = redis.call("LINDEX", ring, -1)
  if not key then
    return false
  end
  local line = base .. ":" .. key
  local job = redis.call("LINDEX", line, -1)
  if job then
    redis.call("RPUSH", queue, job)
    redis.call("HSET", base, "~fed", job)
    redis.call("RPOP", line)
  end
  local left, kept = turn_of(base, key)
  turn_taken(base, ring, key, redis.call("LLEN", line) > 0, left - 1, kept)
  return job ~= false
end
