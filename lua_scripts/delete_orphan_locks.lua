-- delete_orphan_locks: deletes the unique-job locks `locks delete-orphaned`
-- found orphaned (their holder jid was in no queue, schedule, retry set,
-- in-progress list, worker slot, unsettled or repeat-orphan list, in two
-- chunked passes: see cogworker_async/unique/orphans.py), each only while the
-- holder the caller saw still holds it.
--
-- KEYS[i] = a lock key; ARGV[i] = the holder the caller saw (exact bytes)
-- Returns, per lock in order, 1 when deleted, 0 when kept (the lock changed
-- hands, ran out, or is not a string).
--
-- Why atomic per lock: the owner check and the DEL are one step, so a lock a
-- new copy took after the orphan's was released or ran out is never deleted.
-- Bounded: the caller sends a chunk at a time, so Redis is never blocked long.

local deleted = {}
for i = 1, #KEYS do
  local ok, holder = pcall(redis.call, "GET", KEYS[i])
  if ok and holder == ARGV[i] then
    redis.call("DEL", KEYS[i])
    deleted[i] = 1
  else
    deleted[i] = 0
  end
end
return deleted
