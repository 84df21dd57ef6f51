"""A chord's callback and its group's results: what reading them costs.

1. End to end: ``chord(group(member.args(i) for i in range(N)), gather.args())``
   on an in-process worker (concurrency 50). Measured: the callback's payload
   size (as stored: its decoded payload re-encoded), whether it got every
   result in order, and the time from the last member's end to the callback's
   handler start (the flow step, the next stage's start and, with a
   reference, the read of the results). Works on any tree that has
   ``enqueue_flow`` (a same-run pair against ``main``).
2. ``--read``: on the results that run left (N kept), the callback's read
   both ways, alternated ``--repeat`` times: ``per member`` (one awaited
   ``LINDEX`` a member, what ``flow_step`` did before) and ``chunked``
   (``store.batch_results.read_results``, 1,000 a round trip; this tree
   only). Each reports wall time, the Redis commands it sent (``INFO
   commandstats``: its round trips, one command each) and Redis's CPU.

    python bench/chord_results.py [--members 100000] [--read] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import anyio
import common
import orjson
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, chord, current_job, group, job

CONCURRENCY = 50


class Seen:
    last_member_end = 0.0
    callback_start = 0.0
    payload_bytes = 0
    values: list[Any] = []
    done: anyio.Event | None = None


@job(name="bench.chord_member")
async def member(i: int) -> int:
    Seen.last_member_end = time.time()
    return i


@job(name="bench.chord_gather")
async def gather(values: list[Any]) -> int:
    Seen.callback_start = time.time()
    Seen.payload_bytes = len(orjson.dumps(current_job().payload))
    Seen.values = values
    if Seen.done is not None:
        Seen.done.set()
    return len(values)


async def commandstats(redis: Redis) -> dict[str, int]:
    stats = await redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


async def redis_cpu(redis: Redis) -> float:
    cpu = await redis.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


async def end_to_end(url: str, n: int) -> tuple[dict[str, Any], str, list[str], str]:
    namespace = common.new_namespace("chord-results")
    settings = Settings(redis_url=url, namespace=namespace, concurrency=CONCURRENCY)
    Seen.done = anyio.Event()
    Seen.values = []
    async with Client(settings) as client:
        with common.Stopwatch() as enqueue:
            flow = await client.enqueue_flow(
                chord(group(member.args(i) for i in range(n)), gather.args())
            )
        started = time.perf_counter()
        async with Worker(settings, jobs=[member, gather]):
            with anyio.fail_after(900):
                await Seen.done.wait()
        wall = time.perf_counter() - started
        in_order = Seen.values == list(range(n))
        found = {
            "members": n,
            "enqueue_flow_s": enqueue.seconds,
            "run_s": wall,
            "callback_payload_bytes": Seen.payload_bytes,
            "results_in_order": in_order,
            "callback_start_after_last_end_ms": (Seen.callback_start - Seen.last_member_end) * 1000,
        }
        jids = [handle.jid for handle in flow.stages[0]]
        return found, namespace, jids, flow.bids[0]


async def read_per_member(redis: Redis, prefix: str, jids: list[str]) -> list[Any]:
    """What flow_step did: one awaited read a member."""
    values = []
    for jid in jids:
        raw = await redis.lindex(prefix + jid, 0)
        envelope = orjson.loads(raw) if raw is not None else None
        ok = isinstance(envelope, dict) and envelope.get("ok") is True
        values.append(envelope.get("value") if ok else None)  # type: ignore[union-attr]
    return values


async def read_chunked(redis: Redis, namespace: str, bid: str) -> list[Any]:
    from cogworker_async.keys import Keys
    from cogworker_async.store.batch_results import read_results

    keys = Keys(namespace)
    return [value async for pairs in read_results(redis, keys, bid) for _, value in pairs]


async def measure(redis: Redis, read: Any) -> tuple[dict[str, float], list[Any]]:
    before, cpu = await commandstats(redis), await redis_cpu(redis)
    with common.Stopwatch() as watch:
        values = await read()
    after, cpu_after = await commandstats(redis), await redis_cpu(redis)
    sent = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    sent["info"] = max(0, sent.get("info", 0) - 2)  # our own two INFO calls
    # Round trips: the calls the client sent (a script's own LINDEX/LRANGE are
    # counted by commandstats too, but travel in its one call).
    scripts = sent.get("evalsha", 0) + sent.get("eval", 0)
    return {
        "wall_s": watch.seconds,
        "round_trips": float(scripts if scripts else sent.get("lindex", 0)),
        "redis_commands_run": float(sum(sent.values())),
        "redis_cpu_s": cpu_after - cpu,
    }, values


async def reads(url: str, namespace: str, jids: list[str], bid: str, repeat: int) -> dict[str, Any]:
    from cogworker_async.keys import Keys

    prefix = Keys(namespace).result("")
    found: dict[str, list[dict[str, float]]] = {"per_member": [], "chunked": []}
    redis = Redis.from_url(url)
    try:
        for _ in range(repeat):  # alternated, same data
            one, values = await measure(redis, lambda: read_per_member(redis, prefix, jids))
            assert values == list(range(len(jids)))
            found["per_member"].append(one)
            one, values = await measure(redis, lambda: read_chunked(redis, namespace, bid))
            assert values == list(range(len(jids)))
            found["chunked"].append(one)
    finally:
        await redis.aclose()
    return {
        way: {k: common.median([r[k] for r in runs]) for k in runs[0]} | {"runs": runs}
        for way, runs in found.items()
    }


async def bench(url: str, n: int, read: bool, repeat: int) -> dict[str, Any]:
    found, namespace, jids, bid = await end_to_end(url, n)
    try:
        if read:
            found["read"] = await reads(url, namespace, jids, bid, repeat)
    finally:
        await common.cleanup(url, namespace)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async: a chord's results")
    parser.add_argument("--members", type=int, default=100_000)
    parser.add_argument("--read", action="store_true", help="also time the read both ways")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        found = common.run_async(bench(url, args.members, args.read, args.repeat))
    found["machine"] = common.machine()
    print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
