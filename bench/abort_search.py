"""Abort's search: how long finding and removing the oldest of 100,001 queued jobs takes,
and how long Redis is blocked meanwhile.

The oldest job sits at the tail of its queue, in the last window of a search
from the head (``abort_entry.lua`` looks at ``WINDOW`` entries a call): the
worst case. Reported: the whole ``Client.abort`` call; the longest single
window call (from a search for a jid that is nowhere, walking every window);
and the worst PING round trip a second connection saw during the abort (what
another client waits at most: Redis is blocked by one window, not the search).

    python bench/abort_search.py [--jobs 100001] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import common
import jobs
from redis.asyncio import Redis

from cogworker_async import AbortOutcome, Client, Settings
from cogworker_async.keys import Keys
from cogworker_async.store import aborts


async def _pings(redis: Redis, stop: asyncio.Event, worst: list[float]) -> None:
    while not stop.is_set():
        sent = time.perf_counter()
        await redis.ping()
        worst[0] = max(worst[0], time.perf_counter() - sent)


async def once(url: str, total: int) -> dict[str, float]:
    namespace = common.new_namespace("abort")
    keys = Keys(namespace)
    settings = Settings(redis_url=url, namespace=namespace)
    probe = Redis.from_url(url)
    try:
        async with Client(settings) as client:
            jids = await client.enqueue_many(jobs.noop, [(i,) for i in range(total)])
            oldest = jids[0]
            worst = [0.0]
            stop = asyncio.Event()
            pinger = asyncio.create_task(_pings(probe, stop, worst))
            with common.Stopwatch() as watch:
                outcome = await client.abort(oldest)
            stop.set()
            await pinger
            if outcome is not AbortOutcome.REMOVED:
                raise RuntimeError(f"abort of the oldest job: {outcome}, expected removed")
            left = int(await client.redis.llen(keys.queue("default")))
            if left != total - 1:
                raise RuntimeError(f"{left} jobs left, expected {total - 1}")
            # The longest single window call: walk every window for a jid that is nowhere.
            longest, start = 0.0, 0
            while start >= 0:
                sent = time.perf_counter()
                reply = await aborts.abort_entry(
                    client.redis, keys, source=keys.queue("default"), jid="0" * 24, start=start
                )
                longest = max(longest, time.perf_counter() - sent)
                start = reply.next_start
    finally:
        await probe.aclose()
        await common.cleanup(url, namespace)
    return {
        "abort_ms": watch.seconds * 1000,
        "window_ms": longest * 1000,
        "ping_ms": worst[0] * 1000,
    }


async def bench(url: str, *, total: int, repeat: int) -> list[common.Result]:
    title = f"abort the oldest of {total:,} queued jobs (windows of {aborts.WINDOW})"
    common.note(f"{title}: {repeat} run(s)")

    async def run(_: int) -> dict[str, float]:
        return await once(url, total)

    runs = await common.repeat_runs(repeat, run, "abort")
    metrics = [
        ("abort_ms", "Client.abort, whole search", "ms"),
        ("window_ms", "longest single window call", "ms"),
        ("ping_ms", "worst PING of another client meanwhile", "ms"),
    ]
    return [common.collect("abort-search", title, {"jobs": total}, runs, metrics)]


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async abort search cost")
    parser.add_argument("--jobs", type=int, default=100_001, help="jobs queued")
    common.add_common_args(parser)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        results = common.run_async(
            bench(url, total=args.jobs, repeat=args.repeat), use_uvloop=args.uvloop
        )
    common.emit(results, as_json=args.json)


if __name__ == "__main__":
    main()
