"""Ack cost by the acks' order: what Redis spends per job acknowledged.

300 jobs sit on an in-progress list (as fetches leave them: the oldest at the
tail) and are acknowledged in one ``ack.lua`` call: in fetch order (the
common case: the tail, compared in place and trimmed), in fetch order but
for each pair of neighbours swapped (processors finishing a little out of
order: from the first swap on, one LREM each before issue 26, one walk of
the tail already read since), or newest first (one LREM each scanning the
list, before; one walk of the whole list, since); and, "ahead", 300 more
jobs fetched ahead above them, the last ack one of those (swapped, the walk
reads the whole list and rewrites most of it). Redis's own account of
the calls (``INFO commandstats``, the ``evalsha`` microseconds) over
``--calls`` calls, per job acknowledged.

    python bench/ack_order.py [--repeat 3] [--calls 200] [--json]

Run it with ``PYTHONPATH`` set to the tree to measure (the scripts are that
tree's), alternating trees in one session for a same-run pair.
"""

from __future__ import annotations

import argparse
import uuid

import common
import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import Ack

BATCH = 300
IDENTITY = "bench:1:acks"


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


async def run_once(url: str, calls: int) -> dict[str, float]:
    namespace = common.new_namespace("ack-order")
    keys = Keys(namespace)
    redis = Redis.from_url(url)
    run: dict[str, float] = {}
    try:
        for order in ("in_order", "swapped", "reversed", "ahead"):
            spent = 0
            for _ in range(calls):
                jobs = [_job(i) for i in range(BATCH)]
                ahead = [_job(i) for i in range(BATCH)] if order == "ahead" else []
                await redis.lpush(keys.in_progress(IDENTITY), *jobs, *ahead)
                swapped = [jobs[i + 1 - 2 * (i % 2)] for i in range(BATCH)]
                acked = {
                    "in_order": jobs,
                    "swapped": swapped,
                    "reversed": jobs[::-1],
                    "ahead": [*swapped[:-1], ahead[-10]] if ahead else [],
                }[order]
                before = await _evalsha_usec(redis)
                missing = await commands.ack(
                    redis, keys, identity=IDENTITY, acks=[Ack(raw, "") for raw in acked]
                )
                spent += await _evalsha_usec(redis) - before
                assert missing == [], "every ack finds its job"
                assert await redis.llen(keys.in_progress(IDENTITY)) == len(ahead)
                await redis.delete(keys.in_progress(IDENTITY))
            run[f"{order}_us_per_job"] = spent / (calls * BATCH)
    finally:
        await redis.aclose()
        await common.cleanup(url, namespace)
    return run


async def bench(url: str, *, repeat: int, calls: int) -> common.Result:
    title = f"ack.lua by order ({BATCH} acks a call, {calls} calls)"
    common.note(f"{title}: {repeat} run(s)")

    async def once(_: int) -> dict[str, float]:
        return await run_once(url, calls)

    runs = await common.repeat_runs(repeat, once, "ack-order")
    metrics = [
        ("in_order_us_per_job", "evalsha, acks in fetch order", "µs/job"),
        ("swapped_us_per_job", "evalsha, neighbours swapped", "µs/job"),
        ("reversed_us_per_job", "evalsha, acks newest first", "µs/job"),
        ("ahead_us_per_job", "evalsha, swapped, one fetched ahead", "µs/job"),
    ]
    return common.collect("ack-order", title, {"batch": BATCH, "calls": calls}, runs, metrics)


def main() -> None:
    parser = argparse.ArgumentParser(description="ack.lua cost by the acks' order")
    parser.add_argument("--calls", type=int, default=200, help="ack calls per order and run")
    common.add_common_args(parser, uvloop=False)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        result = common.run_async(bench(url, repeat=args.repeat, calls=args.calls))
    common.emit([result], as_json=args.json)


if __name__ == "__main__":
    main()
