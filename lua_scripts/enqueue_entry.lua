-- enqueue_entry: moves one entry of the retry, dead or schedule set onto its
-- queue now (an operator's "retry now" / "enqueue now"), in one step.
--
-- KEYS[1] = the retry, dead or schedule sorted set
-- KEYS[2] = the job's queue list, KEYS[3] = the queues set
-- KEYS[4] = the queue's wake-up marker (a sorted set idle workers block on)
-- ARGV[1] = the entry exactly as it is in the set
-- ARGV[2] = the payload to push (the caller re-encoded it with a new
--           `enqueued_at`, `retry_count` kept)
-- ARGV[3] = the queue's name
-- ARGV[4] = (optional) the kinds of hold a payload names (holds/encoding.py
--           kinds_table, JSON; includes/holds.lua): what the job holds is
--           settled as the "operator_retry" rule says: an overlap=False
--           entry's running lock is taken again (when free or its own), so
--           no slot starts beside the run an operator revived, and a unique
--           lock too; each key only under its kind's prefix (a payload naming
--           any other key, e.g. <ns>:paused, writes nothing)
-- Returns 1 when moved, 0 when the entry was already gone (moved or deleted by
-- someone else). A queue key of the wrong type is a WRONGTYPE error raised
-- before anything was written.
--
-- Why one script: pushed and removed apart, a job could be both queued and
-- still in the set (and run twice when the poller or a second click moved it
-- again); two operators retrying the same entry at once would both push it.
-- Here the ZSCORE check, the push and the removal happen together, so exactly
-- one caller moves an entry. Listing the queue and touching its marker come
-- after the removal and are best effort: once the job is on its queue it runs
-- whether or not they succeed. A unique job takes its lock again: it waits
-- on its queue holding it, as when first enqueued. The holds are best effort
-- too (pcall): a key of the wrong type never fails a move already made.

--- @include holds

if not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  return 0
end
redis.call("LPUSH", KEYS[2], ARGV[2])
redis.call("ZREM", KEYS[1], ARGV[1])
settle_payload_holds(ARGV[2], decode_kinds(ARGV[4]), "operator_retry", false)
redis.pcall("SADD", KEYS[3], ARGV[3])
redis.pcall("ZADD", KEYS[4], 0, "1")
return 1
