"""Delayed jobs on time: how late an idle worker runs a job enqueued with a delay.

An idle worker (subprocess, concurrency 50, default settings: a 5 s
``scheduled_poll_interval``) listens on one queue. N=200 jobs are enqueued
one ``client.enqueue`` at a time with ``delay`` spread evenly over
0.2–``--spread`` s, in a shuffled (fixed) order: most are due while the
poller sleeps, not at a poll, and each one due sooner than all before it
must wake the poller through the wake-up marker;
each job appends ``time.time()`` at its start minus the time it was due
(``time.time()`` just before its enqueue plus its delay) to the Redis list
``<ns>:bench:lat``. Reported: p50, p99 and max in milliseconds.

Both processes share this machine's clock, so no clock skew is involved.
The target (issue 12): p99 under 50 ms.

    python bench/delay_latency.py [--jobs 200] [--spread 4] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

import common
import jobs

from cogworker_async import Client, Settings

IDLE_BEFORE = 2.5  # the worker sits in its blocking waits, as a quiet one would


def title(total: int, spread: float) -> str:
    return f"delayed job lateness, idle worker ({total:,} jobs due over {spread:g} s)"


async def run_once(
    url: str, *, total: int, spread: float, use_uvloop: bool = False
) -> dict[str, float]:
    namespace = common.new_namespace("delay")
    lat_key = f"{namespace}:bench:lat"
    settings = Settings(redis_url=url, namespace=namespace)
    try:
        worker = await common.WorkerProc.start(
            redis_url=url,
            namespace=namespace,
            queues=("default",),
            concurrency=50,
            target=total,
            use_uvloop=use_uvloop,
            latency_key=lat_key,
            give_up_after=spread + 60,
        )
        try:
            await worker.ready()
            await asyncio.sleep(IDLE_BEFORE)
            delays = [0.2 + (spread - 0.2) * i / max(1, total - 1) for i in range(total)]
            random.Random(12).shuffle(delays)
            async with Client(settings) as client:
                for i, delay in enumerate(delays):
                    due = time.time() + delay
                    await client.enqueue(jobs.delayed.options(delay=delay), i, due)
                await worker.report()
                raw = await client.redis.lrange(lat_key, 0, -1)
        finally:
            worker.kill()  # a no-op once it has exited; never left behind on an error
    finally:
        await common.cleanup(url, namespace)
    millis = [float(value) * 1000 for value in raw]
    if len(millis) != total:
        raise RuntimeError(f"expected {total} lateness samples, got {len(millis)}")
    return {
        "p50_ms": common.percentile(millis, 50),
        "p99_ms": common.percentile(millis, 99),
        "max_ms": max(millis),
    }


async def bench(
    url: str, *, total: int = 200, spread: float = 4.0, repeat: int = 3, use_uvloop: bool = False
) -> common.Result:
    name = title(total, spread)
    common.note(f"{name}: {repeat} run(s)")

    async def once(_: int) -> dict[str, float]:
        return await run_once(url, total=total, spread=spread, use_uvloop=use_uvloop)

    runs = await common.repeat_runs(repeat, once, "delay-latency")
    _, loop_name = common.uvloop_factory(use_uvloop)
    return common.collect(
        "delay-latency",
        name,
        {"jobs": total, "spread_s": spread, "concurrency": 50, "loop": loop_name},
        runs,
        [
            ("p50_ms", "late p50", "ms"),
            ("p99_ms", "late p99", "ms"),
            ("max_ms", "late max", "ms"),
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async delayed-job lateness")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--spread", type=float, default=4.0, help="delays run 0.2..spread s")
    common.add_common_args(parser)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        result = common.run_async(
            bench(
                url,
                total=args.jobs,
                spread=args.spread,
                repeat=args.repeat,
                use_uvloop=args.uvloop,
            ),
            use_uvloop=args.uvloop,
        )
    common.emit([result], as_json=args.json)


if __name__ == "__main__":
    main()
