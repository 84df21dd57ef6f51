"""Pickup latency: how long an enqueued job waits before an idle worker starts it.

An idle worker (subprocess, concurrency 50) listens on one queue, or with
``--queues 3`` on three weighted queues a:3, b:2, c:1 (jobs round-robin over
them). The worker is left idle for a moment first so it sits in its blocking
fetch, as a quiet production worker would. Then N=1000 jobs are enqueued one
``client.enqueue`` at a time at a steady 200 jobs/s; each job appends
``time.time()`` at its start minus its payload's ``created_at`` to the Redis
list ``<ns>:bench:lat``. Reported: p50, p99 and max in milliseconds.

Both processes share this machine's clock, so no clock skew is involved.

``--held N`` (issue 23 §3): first N jobs are held by a full concurrency limit
of one key (its slot taken, the N parked on ``<ns>:limits:~parked:hot``, and
``<ns>:limits:~used`` set, so every fetch checks payloads for limits), while
the measured jobs, of no limit, are picked up beside them.

    python bench/latency.py [--queues 1|3] [--jobs 1000] [--rate 200] [--held N]
        [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio

import common
import jobs
import orjson
from redis.asyncio import Redis

from cogworker_async import Client, Settings
from cogworker_async.keys import Keys

IDLE_BEFORE = 2.5  # longer than fetch_idle_max_interval (2 s): the worker is truly idle


def title(queue_count: int, total: int, rate: float) -> str:
    where = "1 queue" if queue_count == 1 else "a:3 b:2 c:1"
    return f"latency idle worker, {where} ({total:,} jobs at {rate:g}/s)"


async def hold(url: str, namespace: str, held: int) -> None:
    """``held`` jobs parked on the full limit "hot" (see the module's docstring)."""
    keys = Keys(namespace)
    redis = Redis.from_url(url)
    try:
        await redis.set(keys.limits_used, 1)
        await redis.sadd(keys.limit_slots("hot"), "0" * 24)
        fields = {"limits": [["concurrency", "hot", 1]], "limit_slots": ["hot"]}
        for start in range(0, held, 10_000):
            batch = [
                orjson.dumps(
                    {"jid": f"{i:024x}", "class": "bench.noop", "args": [], "queue": "default"}
                    | fields
                )
                for i in range(start, min(held, start + 10_000))
            ]
            await redis.lpush(keys.limit_parked("hot"), *batch)
    finally:
        await redis.aclose()


async def run_once(
    url: str,
    *,
    queue_count: int,
    total: int,
    rate: float,
    use_uvloop: bool = False,
    held: int = 0,
) -> dict[str, float]:
    namespace = common.new_namespace(f"lat{queue_count}")
    lat_key = f"{namespace}:bench:lat"
    if queue_count == 1:
        queues: tuple[str, ...] = ("default",)
        targets = [jobs.latency]
    else:
        queues = common.WEIGHTED_QUEUES
        targets = [jobs.latency.options(queue=spec.split(":")[0]) for spec in queues]
    settings = Settings(redis_url=url, namespace=namespace)
    if held:
        await hold(url, namespace, held)
    try:
        worker = await common.WorkerProc.start(
            redis_url=url,
            namespace=namespace,
            queues=queues,
            concurrency=50,
            target=total,
            use_uvloop=use_uvloop,
            latency_key=lat_key,
        )
        try:
            await worker.ready()
            await asyncio.sleep(IDLE_BEFORE)
            async with Client(settings) as client:
                loop = asyncio.get_running_loop()
                start = loop.time()
                for i in range(total):
                    # Absolute deadlines: one slow enqueue does not push every later one back.
                    delay = start + i / rate - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    await client.enqueue(targets[i % len(targets)], i)
                sent_rate = total / (loop.time() - start)
                await worker.report()
                raw = await client.redis.lrange(lat_key, 0, -1)
        finally:
            worker.kill()  # a no-op once it has exited; never left behind on an error
    finally:
        await common.cleanup(url, namespace)
    millis = [float(value) * 1000 for value in raw]
    if len(millis) != total:
        raise RuntimeError(f"expected {total} latency samples, got {len(millis)}")
    return {
        "p50_ms": common.percentile(millis, 50),
        "p99_ms": common.percentile(millis, 99),
        "max_ms": max(millis),
        "sent_per_s": sent_rate,
    }


async def bench(
    url: str,
    *,
    queue_count: int = 1,
    total: int = 1000,
    rate: float = 200.0,
    repeat: int = 3,
    use_uvloop: bool = False,
    held: int = 0,
) -> common.Result:
    name = title(queue_count, total, rate) + (f", {held:,} held by a limit" if held else "")
    common.note(f"{name}: {repeat} run(s)")

    async def once(_: int) -> dict[str, float]:
        return await run_once(
            url, queue_count=queue_count, total=total, rate=rate, use_uvloop=use_uvloop, held=held
        )

    runs = await common.repeat_runs(repeat, once, f"latency-{queue_count}q")
    _, loop_name = common.uvloop_factory(use_uvloop)
    return common.collect(
        f"latency-{queue_count}q",
        name,
        {"jobs": total, "rate": rate, "queues": queue_count, "concurrency": 50, "loop": loop_name},
        runs,
        [
            ("p50_ms", "pickup p50", "ms"),
            ("p99_ms", "pickup p99", "ms"),
            ("max_ms", "pickup max", "ms"),
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async pickup latency")
    parser.add_argument("--queues", type=int, choices=(1, 3), default=1)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0, help="jobs enqueued per second")
    parser.add_argument("--held", type=int, default=0, help="jobs held by a full limit beside")
    common.add_common_args(parser)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        result = common.run_async(
            bench(
                url,
                queue_count=args.queues,
                total=args.jobs,
                rate=args.rate,
                repeat=args.repeat,
                use_uvloop=args.uvloop,
                held=args.held,
            ),
            use_uvloop=args.uvloop,
        )
    common.emit([result], as_json=args.json)


if __name__ == "__main__":
    main()
