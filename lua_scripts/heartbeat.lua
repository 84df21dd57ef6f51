-- heartbeat: everything a live process says about itself, in one step.
--
-- KEYS[1] = presence key (process:<identity>), KEYS[2] = last_beat hash
-- KEYS[3] = in_progress_identities set, KEYS[4] = live_queues sorted set
-- KEYS[5] = workers:<identity> hash, KEYS[6] = processes set
-- KEYS[7] = signals:<identity> list (remote control: "quiet", "stop"), drained
-- KEYS[8] = beating_since hash: identity -> when its current unbroken run of
--           beats began. A run is broken by a gap longer than the presence
--           TTL between two beats as Redis saw them, or by Redis's clock
--           going back: after an outage, a restart from an old snapshot or a
--           refused (OOM) write, the run starts again. Orphan recovery only
--           trusts a judge whose run is at least orphan_threshold long.
-- KEYS[9] = beats sorted set: identity -> this stamp, so orphan recovery reads
--           only overdue identities (ZRANGEBYSCORE) instead of every one.
-- ARGV[1] = JSON object {identity, info, ttl_ms, clock, queues: [...],
--            workers: {slot: json}, reliable: bool}
-- Returns {the stamp written (Redis's clock, epoch s; the caller's clock only
-- if TIME is refused, so liveness never depends on hosts' clocks agreeing),
-- the signals sent to this process since the last beat...}.

local beat = cjson.decode(ARGV[1])
if redis.replicate_commands then redis.replicate_commands() end
local now = tonumber(beat["clock"])
local ok, time = pcall(redis.call, "TIME")
if ok then
  now = tonumber(time[1]) + tonumber(time[2]) / 1000000
end
-- Read before the stamp below is overwritten; a stamp that is not a number
-- counts as none (the run starts now).
local previous = tonumber(redis.call("HGET", KEYS[2], beat["identity"]) or "")
local since = tonumber(redis.call("HGET", KEYS[8], beat["identity"]) or "")
if not previous or not since or now < previous or now - previous > beat["ttl_ms"] / 1000 then
  redis.call("HSET", KEYS[8], beat["identity"], string.format("%.6f", now))
end
redis.call("SET", KEYS[1], beat["info"], "PX", beat["ttl_ms"])
redis.call("HSET", KEYS[2], beat["identity"], string.format("%.6f", now))
-- pcall: a wrong-typed index must never stop a beat (the key guard moves it
-- aside; recovery then walks every registered identity, see overdue.lua).
if KEYS[9] then redis.pcall("ZADD", KEYS[9], now, beat["identity"]) end
if beat["reliable"] then
  redis.call("SADD", KEYS[3], beat["identity"])
end
for _, queue in ipairs(beat["queues"]) do
  redis.call("ZADD", KEYS[4], now, queue)
end
redis.call("DEL", KEYS[5])
for slot, work in pairs(beat["workers"]) do
  redis.call("HSET", KEYS[5], slot, work)
end
redis.call("PEXPIRE", KEYS[5], beat["ttl_ms"])
redis.call("SADD", KEYS[6], beat["identity"])
local reply = {string.format("%.6f", now)}
local ok, signals = pcall(redis.call, "LRANGE", KEYS[7], 0, -1)
if ok then
  for _, signal in ipairs(signals) do reply[#reply + 1] = signal end
  redis.call("DEL", KEYS[7])
end
return reply
