"""Throughput on a 3-primary Redis Cluster: one namespace, or one per shard.

Both runs drain the same number of no-op jobs with the same two worker
processes (``-c 50`` each): either both on one namespace (so one slot, one
primary does all the Redis work), or each on its own namespace whose tag lands
on a different primary; a plain Redis (not a cluster) with both workers on one
namespace is the baseline. The servers are started here (tests/servers.py:
loopback ports, the session's redis-server or a wheel's). Two rates: the
steady one (jobs acknowledged between 10% and 90% of the total, over that
time) and the whole drain's (from starting the workers until every job is
acknowledged; the queues are paused while the workers start, then resumed
together, so start-up is not counted).

    python bench/cluster_namespaces.py [--jobs 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import common  # noqa: E402
import jobs  # noqa: E402
from redis.crc import key_slot  # noqa: E402

from cogworker_async import Client, Settings, api  # noqa: E402
from cogworker_async.embedded import EmbeddedRedis  # noqa: E402
from cogworker_async.keys import Keys  # noqa: E402
from cogworker_async.store.connection import connect  # noqa: E402
from tests.servers import Cluster  # noqa: E402


def tags_on_distinct_primaries(cluster: Cluster, count: int) -> list[str]:
    """``count`` hash tags whose slots are served by ``count`` different primaries."""
    found: dict[int, str] = {}
    for index in range(10_000):
        tag = f"cw{index}"
        found.setdefault(cluster.owner(key_slot(tag.encode())), tag)
        if len(found) == count:
            return list(found.values())
    raise RuntimeError("no such tags")


async def drain(url: str, namespaces: list[str], per_namespace: int) -> tuple[float, float]:
    """(steady jobs/s, whole-drain jobs/s) for ``per_namespace`` jobs on each namespace."""
    for namespace in namespaces:
        settings = Settings(redis_url=url, namespace=namespace)
        async with Client(settings) as client:
            await client.enqueue_many(jobs.noop, [(i,) for i in range(per_namespace)])
    workers = 2
    chosen = [namespaces[i % len(namespaces)] for i in range(workers)]
    redis = connect(Settings(redis_url=url, namespace=namespaces[0]))
    # Paused while the workers start one after the other, then resumed together:
    # no worker drains its share before the other has started.
    for namespace in namespaces:
        await api.pause(redis, Keys(namespace), "default", force=True)
    procs = [
        await common.start_cli_worker(redis_url=url, namespace=ns, concurrency=50) for ns in chosen
    ]
    for namespace in namespaces:
        workers_here = chosen.count(namespace)
        proc = procs[chosen.index(namespace)]
        await common.wait_registered(redis, namespace, workers_here, proc)
    started = time.perf_counter()
    for namespace in namespaces:
        await api.resume(redis, Keys(namespace), "default", force=True)
    total = per_namespace * len(namespaces)
    marks: dict[str, tuple[float, int]] = {}
    try:
        while True:
            counts = [int(await redis.get(f"{ns}:stats:processed") or 0) for ns in namespaces]
            done, now = sum(counts), time.perf_counter()
            if done >= 0.1 * total:
                marks.setdefault("low", (now, done))
            if done >= 0.9 * total:
                marks.setdefault("high", (now, done))
            if all(count >= per_namespace for count in counts):
                break
            await asyncio.sleep(0.005)
        took = time.perf_counter() - started
    finally:
        for proc in procs:
            await common.stop_cli_worker(proc)
        await redis.aclose()
    (t0, n0), (t1, n1) = marks["low"], marks["high"]
    return (n1 - n0) / max(t1 - t0, 1e-9), total / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs in all, per run")
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    cluster = Cluster(3)
    try:
        layouts = [
            ("one plain Redis, one namespace", None, 1),
            ("cluster, one namespace", cluster, 1),
            ("cluster, 2 namespaces on 2 shards", cluster, 2),
        ]
        rows = []
        with EmbeddedRedis() as plain:
            for layout, (label, on, count) in enumerate(layouts):
                steady, whole = [], []
                for run in range(options.repeat):
                    # A namespace of its own per layout and run: counters start at 0.
                    if on is None:
                        url, names = plain.url, [f"{{plain}}l{layout}r{run}"]
                    else:
                        tags = tags_on_distinct_primaries(on, count)
                        url, names = on.url, [f"{{{tag}}}l{layout}r{run}" for tag in tags]
                    rate, overall = asyncio.run(drain(url, names, options.jobs // count))
                    steady.append(rate)
                    whole.append(overall)
                rows.append((label, steady, whole))
        print(
            f"| layout ({options.jobs:,} no-op jobs, 2 workers x c=50) "
            "| steady jobs/s (median) | whole drain jobs/s (median) | steady runs |"
        )
        print("| --- | ---: | ---: | --- |")
        for label, steady, whole in rows:
            shown = ", ".join(f"{r:,.0f}" for r in steady)
            print(
                f"| {label} | {common.median(steady):,.0f} | {common.median(whole):,.0f} "
                f"| {shown} |"
            )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
