"""The floor of a plain job's fetch and ack inside Redis: what each part costs.

Issue 26 §3 asks for Redis at ≤ 1.0 µs per no-op job. ``fetch.lua`` moves a
batch with ``LRANGE`` + ``LPUSH`` + ``LTRIM`` and acknowledges the previous
batch by comparing the list's tail in place (``includes/ack_jobs.lua``).
This measures the primitives those are made of, and the alternatives, as
bare probe scripts (one queue, no limits, no suspects, no stats): 300 jobs a
call of 160-byte payloads, ``--calls`` calls per probe and run, Redis's own
account of each call (``INFO commandstats``: the ``evalsha`` microseconds
it added), per job. That is the script's own time, by the clock (on a busy
machine it grows when Redis is descheduled), without parsing the call's
arguments: a worker's Redis CPU per job (``throughput.py``) counts both.
The probes are measurements, not the library's scripts: none is safe to run
as an ack (the trimming ones trust the caller about the list).

Taking (a batch from a queue into the in-progress list, the jobs returned):

- ``take``: today's shape (``LRANGE``, a byte test a job, ``LPUSH``, ``LTRIM``);
- ``take_no_reply``: the same, returning a count (the reply's share);
- ``take_read_only``: ``LRANGE`` + ``LTRIM``, nothing pushed (reading's share);
- ``take_lmove``: one ``LMOVE`` a job (the per-command cost);
- ``take_lmpop``: ``LMPOP`` (Redis 7) then ``LPUSH``.

Acknowledging 300 jobs at the list's tail:

- ``ack_compare``: today's common path (``LRANGE`` of the tail, compared
  in place with the payloads sent, one ``LTRIM``);
- ``ack_compare_packed``: the same comparison with the payloads sent as one
  argument, each tail entry found at its offset (``string.find``, plain);
- ``ack_trim_payloads``: the payloads sent and looked at (the suspect byte),
  the tail trimmed by count without reading it (the arguments' share);
- ``ack_trim_checked``: nothing per job sent; a sequence number and the
  list's length checked, then trimmed by count (an ack that trusts a model
  of the list the worker would keep: the best any ack can do).

    python bench/script_floor.py [--repeat 3] [--calls 100] [--json]

Needs Redis 7 (``LMPOP``); a private server is started unless ``--redis-url``.
"""

from __future__ import annotations

import argparse
import uuid

import common
import orjson
from redis.asyncio import Redis

BATCH = 300

# Each probe: KEYS[1] = the queue (taking) or the in-progress list (acking),
# KEYS[2] = the in-progress list (taking) or a sequence counter (acking);
# ARGV[1] = the batch size; returns the jobs taken (or their count) or the
# count acked. Atomic as any script; correct only for this bench's lists.
PROBES: dict[str, str] = {
    "take": """
local batch = redis.call("LRANGE", KEYS[1], -tonumber(ARGV[1]), -1)
local taken = {}
for j = #batch, 1, -1 do
  local job = batch[j]
  if string.byte(job, 3) ~= 115 then
    taken[#taken + 1] = job
  end
end
redis.call("LPUSH", KEYS[2], unpack(taken))
redis.call("LTRIM", KEYS[1], 0, -(#taken + 1))
return taken""",
    "take_no_reply": """
local batch = redis.call("LRANGE", KEYS[1], -tonumber(ARGV[1]), -1)
local taken = {}
for j = #batch, 1, -1 do
  local job = batch[j]
  if string.byte(job, 3) ~= 115 then
    taken[#taken + 1] = job
  end
end
redis.call("LPUSH", KEYS[2], unpack(taken))
redis.call("LTRIM", KEYS[1], 0, -(#taken + 1))
return #taken""",
    "take_read_only": """
local batch = redis.call("LRANGE", KEYS[1], -tonumber(ARGV[1]), -1)
redis.call("LTRIM", KEYS[1], 0, -(#batch + 1))
return #batch""",
    "take_lmove": """
local taken = {}
for j = 1, tonumber(ARGV[1]) do
  taken[j] = redis.call("LMOVE", KEYS[1], KEYS[2], "RIGHT", "LEFT")
end
return taken""",
    "take_lmpop": """
local taken = redis.call("LMPOP", 1, KEYS[1], "RIGHT", "COUNT", tonumber(ARGV[1]))[2]
redis.call("LPUSH", KEYS[2], unpack(taken))
return taken""",
    # ARGV[2..] = the acked payloads, oldest first.
    "ack_compare": """
local count = tonumber(ARGV[1])
local tail = redis.call("LRANGE", KEYS[1], -count, -1)
local last, trimmed = #tail, 0
while trimmed < last and tail[last - trimmed] == ARGV[2 + trimmed] do
  trimmed = trimmed + 1
end
redis.call("LTRIM", KEYS[1], 0, -(trimmed + 1))
return trimmed""",
    "ack_trim_payloads": """
local count = tonumber(ARGV[1])
for i = 2, count + 1 do
  if string.byte(ARGV[i], 3) == 115 then
    return -1
  end
end
redis.call("LTRIM", KEYS[1], 0, -(count + 1))
return count""",
    # ARGV[2] = the acked payloads concatenated, oldest first: one string
    # crossing into Lua instead of 300, each tail entry matched at its offset.
    "ack_compare_packed": """
local count = tonumber(ARGV[1])
local packed = ARGV[2]
local tail = redis.call("LRANGE", KEYS[1], -count, -1)
local trimmed, at = 0, 1
while trimmed < #tail do
  local job = tail[#tail - trimmed]
  if string.find(packed, job, at, true) ~= at then
    break
  end
  at = at + #job
  trimmed = trimmed + 1
end
redis.call("LTRIM", KEYS[1], 0, -(trimmed + 1))
return trimmed""",
    # ARGV[2] = the sequence expected, ARGV[3] = the list's length expected.
    "ack_trim_checked": """
local count = tonumber(ARGV[1])
if redis.call("GET", KEYS[2]) ~= ARGV[2] or redis.call("LLEN", KEYS[1]) ~= tonumber(ARGV[3]) then
  return -1
end
redis.call("LTRIM", KEYS[1], 0, -(count + 1))
redis.call("INCR", KEYS[2])
return count""",
}


def _job(i: int) -> bytes:
    return orjson.dumps(
        {
            "jid": uuid.uuid4().hex[:24],
            "class": "bench.noop",
            "args": [i],
            "queue": "default",
            "retry": True,
            "created_at": 1765000000.123456,
            "enqueued_at": 1765000000.123456,
        }
    )


async def _evalsha_usec(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("usec", 0))


async def _one_call(redis: Redis, probe: str, sha: str, queue: str, listed: str, seq: str) -> int:
    """Sets up one call's lists, runs the probe once; its ``evalsha`` µs."""
    jobs = [_job(i) for i in range(BATCH)]
    await redis.delete(queue, listed, seq)
    if probe.startswith("take"):
        await redis.lpush(queue, *jobs)
        before = await _evalsha_usec(redis)
        out = await redis.evalsha(sha, 2, queue, listed, BATCH)
        done = len(out) if isinstance(out, list) else out
        pushed = 0 if probe == "take_read_only" else BATCH
        assert done == BATCH, probe
        assert await redis.llen(listed) == pushed, probe
    else:
        await redis.lpush(listed, *jobs)
        await redis.set(seq, 7)
        before = await _evalsha_usec(redis)
        if probe == "ack_trim_checked":
            args: list[bytes | int] = [BATCH, 7, BATCH]
        elif probe == "ack_compare_packed":
            args = [BATCH, b"".join(jobs)]
        else:
            args = [BATCH, *jobs]
        out = await redis.evalsha(sha, 2, listed, seq, *args)
        assert out == BATCH, probe
        assert await redis.llen(listed) == 0, probe
    return await _evalsha_usec(redis) - before


async def run_once(url: str, calls: int) -> dict[str, float]:
    namespace = common.new_namespace("script-floor")
    queue, listed, seq = (f"{namespace}:{name}" for name in ("queue", "in_progress", "seq"))
    redis = Redis.from_url(url)
    run: dict[str, float] = {}
    try:
        for probe, text in PROBES.items():
            sha = await redis.script_load(text)
            spent = 0
            for _ in range(calls):
                spent += await _one_call(redis, probe, sha, queue, listed, seq)
            run[f"{probe}_us_per_job"] = spent / (calls * BATCH)
    finally:
        await redis.aclose()
        await common.cleanup(url, namespace)
    return run


async def bench(url: str, *, repeat: int, calls: int) -> common.Result:
    title = f"fetch/ack primitives inside Redis ({BATCH} jobs a call, {calls} calls)"
    common.note(f"{title}: {repeat} run(s)")

    async def once(_: int) -> dict[str, float]:
        return await run_once(url, calls)

    runs = await common.repeat_runs(repeat, once, "script-floor")
    metrics = [(f"{probe}_us_per_job", f"evalsha, {probe}", "µs/job") for probe in PROBES]
    return common.collect("script-floor", title, {"batch": BATCH, "calls": calls}, runs, metrics)


def main() -> None:
    parser = argparse.ArgumentParser(description="fetch/ack primitives' cost inside Redis")
    parser.add_argument("--calls", type=int, default=100, help="calls per probe and run")
    common.add_common_args(parser, uvloop=False)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        result = common.run_async(bench(url, repeat=args.repeat, calls=args.calls))
    common.emit([result], as_json=args.json)


if __name__ == "__main__":
    main()
