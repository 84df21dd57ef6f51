-- requeue_job(job, queue_prefix, wakeup_prefix, default_queue, target,
-- kinds, event): puts one job back on its queue and returns the queue's name.
-- Cluster: builds queue keys and wake-up markers (prefix .. queue) from a prefix inside Lua; every prefix starts with the namespace, so with a hash-tagged namespace ({cw}) each such key is in the tag's slot, like KEYS (tests/cluster/test_script_slots.py).
--
-- It goes onto the end its queue is popped from, so it runs next. The queue
-- is `target` when the caller knows where the job was fetched from (its own
-- jobs, on shutdown), else the payload's own `queue`; a payload whose `queue`
-- can't be read goes to `default_queue` (the processor then buries it as
-- unparseable, with its raw text). The queue's wake-up marker is touched so
-- an idle worker picks it up at once.
-- What the job holds is settled in the same step as `event`'s rule says
-- ("recovery_requeue" or "shutdown_requeue"; `kinds`: the decoded kinds
-- table, nil to mind none; see includes/holds.lua): an overlap=False
-- periodic entry's running lock is kept (owner-checked, for its queued TTL),
-- so the ticker can't start the next slot while the requeued run waits; a
-- unique lock is left as it is (the job still holds it).
-- Every script that puts a job back calls this one function, so a rule for
-- requeued jobs changes one place.
--- @include holds
local function requeue_job(job, queue_prefix, wakeup_prefix, default_queue, target,
                           kinds, event)
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
  settle_payload_holds(job, kinds, event, true)
  return queue
end
