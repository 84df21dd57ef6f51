"""A million-member batch: what its creation costs the client and Redis, and how
soon its callback follows its last member's end.

1. Creation: ``client.batch`` + ``b.enqueue_stream`` over a generator of
   ``--members`` items (streamed in ``MEMBERS_CHUNK`` calls, no jid kept).
   Measured: the client's peak RSS growth over the creation
   (``resource.getrusage``, ``ru_maxrss``: creation is the first thing the
   process does after connecting, so the peak is its), Redis's
   ``used_memory`` growth per member, and, exactly (``MEMORY USAGE ...
   SAMPLES 0``), per pending member: the pending set, and the queue list (the
   jobs themselves, which a plain job costs too), plus the bytes the
   ``"batch"`` field adds to each payload. The batch's own cost per pending
   member is the pending set's share plus that field.
2. End to end: an in-process worker (concurrency 50) drains ``--run-members``
   members of a second batch (``--run-members 0``: skipped). Each member notes
   when its handler returned; the callback's enqueue time is the batch hash's
   ``fired:complete`` (Redis ``TIME`` in the step that ended the last member).
   Reported: that minus the last member's end (the callback's enqueue latency),
   and the callback's start minus the last member's end.

``--keep-jids`` creates it with ``enqueue_many`` instead (which returns every
jid), to compare the client's memory.

    python bench/batch_big.py [--members 1000000] [--run-members 1000000] [--keep-jids] [--json]
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Iterator
from typing import Any

import anyio
import common
import orjson
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, current_job, job

CONCURRENCY = 50


class Ends:
    """When the last member's handler returned, and when the callback started."""

    last_member_end = 0.0
    callback_start = 0.0
    members = 0
    done: anyio.Event | None = None


@job(name="bench.big_member")
async def big_member(i: int) -> None:
    Ends.members += 1
    Ends.last_member_end = time.time()


@job(name="bench.big_callback")
async def big_callback() -> None:
    if current_job().payload["batch_callback"]["event"] == "complete":
        Ends.callback_start = time.time()
        if Ends.done is not None:
            Ends.done.set()


def items(n: int) -> Iterator[tuple[int]]:
    for i in range(n):
        yield (i,)


def rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


async def used_memory(redis: Redis) -> int:
    return int((await redis.info("memory"))["used_memory"])


async def create(url: str, members: int, keep_jids: bool = False) -> dict[str, float]:
    namespace = common.new_namespace("batch-big")
    settings = Settings(redis_url=url, namespace=namespace)
    redis = Redis.from_url(url)
    try:
        async with Client(settings) as client:
            before_rss = rss_peak_mb()
            before_mem = await used_memory(redis)
            with common.Stopwatch() as watch:
                async with client.batch(on_complete=big_callback.args()) as b:
                    if keep_jids:  # enqueue_many: every jid kept, for comparison
                        added = len(await b.enqueue_many(big_member, items(members)))
                    else:
                        added = await b.enqueue_stream(big_member, items(members))
            peak_rss = rss_peak_mb()
            after_mem = await used_memory(redis)
            keys = client.keys
            pending = await redis.memory_usage(keys.batch_pending(b.bid), samples=0) or 0
            queue = await redis.memory_usage(keys.queue("default"), samples=0) or 0
            one = orjson.loads(await redis.lindex(keys.queue("default"), 0))
            with_field = len(orjson.dumps(one))
            del one["batch"]
            field = with_field - len(orjson.dumps(one))
            if added != members or await redis.scard(keys.batch_pending(b.bid)) != members:
                raise RuntimeError(f"{added} of {members} members added")
    finally:
        await redis.aclose()
        await common.cleanup(url, namespace)
    return {
        "create_s": watch.seconds,
        "create_members_per_s": members / watch.seconds,
        "client_rss_before_mb": before_rss,
        "client_rss_peak_mb": peak_rss,
        "client_rss_growth_mb": peak_rss - before_rss,
        "redis_used_memory_per_member_b": (after_mem - before_mem) / members,
        "pending_set_per_member_b": pending / members,
        "queue_per_member_b": queue / members,
        "batch_field_per_payload_b": field,
        "batch_own_per_member_b": pending / members + field,
    }


async def end_to_end(url: str, members: int) -> dict[str, float]:
    namespace = common.new_namespace("batch-big-run")
    settings = Settings(redis_url=url, namespace=namespace, concurrency=CONCURRENCY)
    Ends.members = 0
    Ends.last_member_end = Ends.callback_start = 0.0
    Ends.done = anyio.Event()
    try:
        async with Client(settings) as client:
            async with client.batch(on_complete=big_callback.args()) as b:
                await b.enqueue_stream(big_member, items(members))
            started = time.perf_counter()
            async with Worker(settings, jobs=[big_member, big_callback]):
                with anyio.fail_after(600):
                    await Ends.done.wait()
            wall = time.perf_counter() - started
            fields = await client.redis.hmget(client.keys.batch(b.bid), ["fired:complete"])
            fired = float(fields[0])
            status = await client.batch_status(b.bid)
            if status is None or status["succeeded"] != members:
                raise RuntimeError(f"the batch did not end with every member counted: {status}")
    finally:
        await common.cleanup(url, namespace)
    return {
        "run_s": wall,
        "run_members_per_s": members / wall,
        "callback_enqueue_after_last_end_ms": (fired - Ends.last_member_end) * 1000,
        "callback_start_after_last_end_ms": (Ends.callback_start - Ends.last_member_end) * 1000,
    }


async def bench(url: str, members: int, run_members: int, keep_jids: bool) -> dict[str, Any]:
    found: dict[str, Any] = {"members": members, **await create(url, members, keep_jids)}
    if run_members:
        found["run_members"] = run_members
        found.update(await end_to_end(url, run_members))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async: a million-member batch")
    parser.add_argument("--members", type=int, default=1_000_000, help="members created")
    parser.add_argument(
        "--run-members", type=int, default=1_000_000, help="members run end to end (0: none)"
    )
    parser.add_argument(
        "--keep-jids", action="store_true", help="create with enqueue_many (keeps every jid)"
    )
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        found = common.run_async(bench(url, args.members, args.run_members, args.keep_jids))
    found["machine"] = common.machine()
    if args.json:
        print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
    else:
        for name, value in found.items():
            print(f"{name}: {value:,.1f}" if isinstance(value, float) else f"{name}: {value}")


if __name__ == "__main__":
    main()
