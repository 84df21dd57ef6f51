-- deregister: a process that is leaving removes what says it is alive, and
-- leaves the registries only if its in-progress list is empty.
--
-- KEYS[1] = its presence key, KEYS[2] = its workers hash, KEYS[3] = processes
-- set, KEYS[4] = its in-progress list, KEYS[5] = last_beat hash,
-- KEYS[6] = beating_since hash, KEYS[7] = in_progress_identities set
-- KEYS[8] = beats sorted set (recovery's index of last beats)
-- ARGV[1] = its identity
-- Returns 1 when it left the registries too, 0 when its list still holds jobs
-- (kept for orphan recovery, which finds them through the stamp left here).
--
-- Why one script: checked apart from the removal, a job landing on the list
-- between the two (a fetch reply still on its way) would sit on a list no
-- registry names, and no recovery would ever find it.
redis.call("DEL", KEYS[1], KEYS[2])
redis.call("SREM", KEYS[3], ARGV[1])
if redis.call("LLEN", KEYS[4]) ~= 0 then
  return 0
end
redis.call("HDEL", KEYS[5], ARGV[1])
redis.call("HDEL", KEYS[6], ARGV[1])
if KEYS[8] then redis.call("ZREM", KEYS[8], ARGV[1]) end
redis.call("SREM", KEYS[7], ARGV[1])
return 1
