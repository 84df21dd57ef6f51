-- requeue_job(job, queue_prefix, wakeup_prefix, default_queue, target,
-- lock_prefix, lock_ttl): puts one job back on its queue and returns the
-- queue's name.
-- Cluster: builds queue keys and wake-up markers (prefix .. queue) from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
--
-- It goes onto the end its queue is popped from, so it runs next. The queue
-- is `target` when the caller knows where the job was fetched from (its own
-- jobs, on shutdown), else the payload's own `queue`; a payload whose `queue`
-- can't be read goes to `default_queue` (the processor then buries it as
-- unparseable, with its raw text). The queue's wake-up marker is touched so
-- an idle worker picks it up at once.
-- A job of an overlap=False periodic entry re-takes its entry's running lock
-- (owner-checked, its queued TTL, `lock_ttl` ms when the payload names none)
-- in the same step, so the ticker can't start the next slot while the
-- requeued run waits: `lock_prefix` is <ns>:periodic:running:, or nil/"" to
-- skip the check (see running_lock).
-- Every script that puts a job back calls this one function, so a rule for
-- requeued jobs changes one place.
--- @include running_lock
local function requeue_job(job, queue_prefix, wakeup_prefix, default_queue, target,
                           lock_prefix, lock_ttl)
  local queue = target
  if type(queue) ~= "string" or queue == "" then
    queue = default_queue
    local ok, decoded = pcall(cjson.decode, job)
    if ok and type(decoded) == "table" and type(decoded["queue"]) == "string"
        and decoded["queue"] ~= "" then
      queue = decoded["queue"]
    end
  end
  redis.call("RPUSH", queue_prefix .. queue, job)
  redis.pcall("ZADD", wakeup_prefix .. queue, 0, "1")
  retake_for(job, lock_prefix, lock_ttl)
  return queue
end
