"""Run one benchmark worker in its own process and report its wall and CPU time.

The benchmark drivers start this as a subprocess so that the worker's CPU
time (``time.process_time()``: user + system, all threads) is its own and
not mixed with the enqueuing client's.

Protocol on stdout: the line ``READY`` once the worker fetches, then one JSON
line when ``<ns>:stats:processed`` has reached ``--target`` (or the timeout
passed)::

    {"ok": true, "processed": N, "handler_calls": N, "failed": 0, "wall_s": ..., "cpu_s": ...,
     "redis_cpu_s": ..., "loop": "asyncio"}

``wall_s`` and ``cpu_s`` run from the start of the first job in this process
to the moment the processed counter (incremented when a job is acknowledged)
was seen at the target. The counter is polled every ``--poll`` seconds from
this process, so that poll is part of the CPU measured (a GET every 5 ms).
``redis_cpu_s`` is the Redis server's CPU time (INFO cpu) over about the same
window.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import jobs
from redis.asyncio import Redis

from cogworker_async import Settings, Worker


async def _redis_cpu(redis: Redis) -> float:
    info = await redis.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def _counter(redis: Redis, key: str) -> int:
    value = await redis.get(key)
    return int(value or 0)


async def _watch(redis: Redis, namespace: str, target: int, poll: float, limit: float) -> dict:
    processed_key = f"{namespace}:stats:processed"
    deadline = time.monotonic() + limit
    redis_cpu_first: float | None = None
    processed = 0
    while True:
        if redis_cpu_first is None and jobs.WINDOW.wall is not None:
            redis_cpu_first = await _redis_cpu(redis)
        processed = await _counter(redis, processed_key)
        if processed >= target:
            end_wall = time.perf_counter()
            end_cpu = time.process_time()
            break
        if time.monotonic() > deadline:
            return {"ok": False, "processed": processed, "error": f"not done after {limit} s"}
        await asyncio.sleep(poll)
    redis_cpu_end = await _redis_cpu(redis)
    failed = await _counter(redis, f"{namespace}:stats:failed")
    assert jobs.WINDOW.wall is not None
    assert jobs.WINDOW.cpu is not None
    return {
        "ok": failed == 0 and jobs.WINDOW.calls >= target,
        "processed": processed,
        "handler_calls": jobs.WINDOW.calls,
        "failed": failed,
        "wall_s": end_wall - jobs.WINDOW.wall,
        "cpu_s": end_cpu - jobs.WINDOW.cpu,
        "redis_cpu_s": redis_cpu_end - (redis_cpu_first or redis_cpu_end),
    }


async def _main(args: argparse.Namespace, loop_name: str) -> dict:
    settings = Settings(
        redis_url=args.redis_url,
        namespace=args.namespace,
        concurrency=args.concurrency,
        queues=tuple(args.queue),
    )
    redis = Redis.from_url(args.redis_url)
    if args.latency_key:
        jobs.configure_sink(redis, args.latency_key)
    worker = Worker(settings, jobs=jobs.ALL, middleware=[jobs.pass_through] * args.middleware)
    worker.freeze_heap = hasattr(worker, "freeze_heap")  # as the CLI's worker (worker/heap.py)
    run = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.started.wait(), timeout=30)
        print("READY", flush=True)
        result = await _watch(redis, args.namespace, args.target, args.poll, args.timeout)
    finally:
        worker.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        await redis.aclose()
    result["loop"] = loop_name
    return result


def _loop_factory(use_uvloop: bool) -> tuple[Callable[[], Any] | None, str]:
    if not use_uvloop:
        return None, "asyncio"
    try:
        import uvloop
    except ImportError:
        print("uvloop is not installed: using the asyncio event loop", file=sys.stderr)
        return None, "asyncio"
    return uvloop.new_event_loop, "uvloop"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--queue", action="append", required=True, help="NAME[:WEIGHT]")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--target", type=int, required=True, help="jobs processed to wait for")
    parser.add_argument("--latency-key", help="Redis list the latency job appends to")
    parser.add_argument(
        "--middleware", type=int, default=0, help="pass-through server middleware layers"
    )
    parser.add_argument("--poll", type=float, default=0.005)
    parser.add_argument("--timeout", type=float, default=110.0)
    parser.add_argument("--uvloop", action="store_true")
    args = parser.parse_args()
    # The library configures no logging; warnings (and worse) should still be seen.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    factory, loop_name = _loop_factory(args.uvloop)
    with asyncio.Runner(loop_factory=factory) as runner:
        result = runner.run(_main(args, loop_name))
    print(json.dumps(result), flush=True)
    sys.exit(0 if result.get("ok") else 1)


if __name__ == "__main__":
    main()
