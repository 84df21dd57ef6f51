"""Enqueue speed, with no worker running.

* ``enqueue_many`` of 100,000 no-op jobs: one call, one pipeline.
* ``enqueue`` of 20,000 jobs, one call per job, 500 at a time under
  ``asyncio.gather`` (each call is one script round trip).

Each part checks that the queue really holds every job afterwards.

    python bench/enqueue.py [--many 100000] [--single 20000] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio

import common
import jobs
from redis.asyncio import Redis
from redis.exceptions import MaxConnectionsError

from cogworker_async import Client, Settings
from cogworker_async.keys import Keys

CHUNK = 500


async def _queued(client: Client, namespace: str) -> int:
    return int(await client.redis.llen(Keys(namespace).queue("default")))


async def many_once(url: str, total: int) -> dict[str, float]:
    namespace = common.new_namespace("enq-many")
    args = [(i,) for i in range(total)]
    try:
        async with Client(Settings(redis_url=url, namespace=namespace)) as client:
            with common.Stopwatch() as watch:
                await client.enqueue_many(jobs.noop, args)
            queued = await _queued(client, namespace)
    finally:
        await common.cleanup(url, namespace)
    if queued != total:
        raise RuntimeError(f"enqueue_many: {queued} jobs queued, expected {total}")
    return {"jobs_per_s": total / watch.seconds}


async def _single(url: str, total: int, *, own_pool: bool) -> dict[str, float]:
    namespace = common.new_namespace("enq-one")
    settings = Settings(redis_url=url, namespace=namespace)
    # own_pool: a client whose pool has room for a whole chunk of concurrent calls.
    redis = Redis.from_url(url, max_connections=CHUNK) if own_pool else None
    try:
        async with Client(settings, redis=redis) as client:
            with common.Stopwatch() as watch:
                for start in range(0, total, CHUNK):
                    stop = min(start + CHUNK, total)
                    await asyncio.gather(
                        *(client.enqueue(jobs.noop, i) for i in range(start, stop))
                    )
            queued = await _queued(client, namespace)
    finally:
        if redis is not None:
            await redis.aclose()
        await common.cleanup(url, namespace)
    if queued != total:
        raise RuntimeError(f"enqueue: {queued} jobs queued, expected {total}")
    return {"jobs_per_s": total / watch.seconds, "own_pool": float(own_pool)}


async def single_once(url: str, total: int) -> dict[str, float]:
    """With the Client's own connection pool; if that refuses 500 concurrent calls
    (redis-py >= 6 caps a pool at 100 connections and raises rather than waits),
    say so and measure again with a pool of CHUNK connections."""
    try:
        return await _single(url, total, own_pool=False)
    except MaxConnectionsError as exc:
        common.note(
            f"  Client's default pool failed under {CHUNK} concurrent enqueue calls "
            f"(MaxConnectionsError: {exc}); measuring with a {CHUNK}-connection pool"
        )
        return await _single(url, total, own_pool=True)


async def bench(
    url: str, *, many: int = 100_000, single: int = 20_000, repeat: int = 3
) -> list[common.Result]:
    many_title = f"enqueue_many ({many:,} jobs, one call)"
    common.note(f"{many_title}: {repeat} run(s)")

    async def many_run(_: int) -> dict[str, float]:
        return await many_once(url, many)

    many_runs = await common.repeat_runs(repeat, many_run, "enqueue_many")

    single_title = f"enqueue ({single:,} single calls, gather x{CHUNK})"
    common.note(f"{single_title}: {repeat} run(s)")

    async def single_run(_: int) -> dict[str, float]:
        return await single_once(url, single)

    single_runs = await common.repeat_runs(repeat, single_run, "enqueue")
    own_pool = any(run["own_pool"] for run in single_runs)
    pool = "Client default pool"
    if own_pool:
        single_title += f" [own {CHUNK}-conn pool: default pool raised MaxConnectionsError]"
        pool = f"bench-supplied {CHUNK}-connection pool (the default one raised)"
    metrics = [("jobs_per_s", "enqueued", "jobs/s")]
    return [
        common.collect("enqueue-many", many_title, {"jobs": many}, many_runs, metrics),
        common.collect(
            "enqueue-single",
            single_title,
            {"jobs": single, "chunk": CHUNK, "pool": pool},
            single_runs,
            metrics,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async enqueue speed")
    parser.add_argument("--many", type=int, default=100_000, help="jobs for enqueue_many")
    parser.add_argument("--single", type=int, default=20_000, help="jobs for single enqueue")
    common.add_common_args(parser)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        results = common.run_async(
            bench(url, many=args.many, single=args.single, repeat=args.repeat),
            use_uvloop=args.uvloop,
        )
    common.emit(results, as_json=args.json)


if __name__ == "__main__":
    main()
