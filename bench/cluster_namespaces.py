"""Throughput on a 3-primary Redis Cluster: one namespace, or one per shard.

Both runs drain the same number of no-op jobs with the same two worker
processes (``-c 50`` each): either both on one namespace (so one slot, one
primary does all the Redis work), or each on its own namespace whose tag lands
on a different primary. The cluster is started here (tests/servers.py: loopback
ports, the session's redis-server or a wheel's). Wall time runs from starting
the workers until every job is acknowledged, start-up included.

    python bench/cluster_namespaces.py [--jobs 20000] [--repeat 2]
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

from cogworker_async import Client, Settings  # noqa: E402
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


async def drain(url: str, namespaces: list[str], per_namespace: int) -> float:
    for namespace in namespaces:
        settings = Settings(redis_url=url, namespace=namespace)
        async with Client(settings) as client:
            await client.enqueue_many(jobs.noop, [(i,) for i in range(per_namespace)])
    workers = 2
    chosen = [namespaces[i % len(namespaces)] for i in range(workers)]
    started = time.perf_counter()
    procs = [
        await common.start_cli_worker(redis_url=url, namespace=ns, concurrency=50) for ns in chosen
    ]
    redis = connect(Settings(redis_url=url, namespace=namespaces[0]))
    try:
        while True:
            counts = [int(await redis.get(f"{ns}:stats:processed") or 0) for ns in namespaces]
            if all(count >= per_namespace for count in counts):
                break
            await asyncio.sleep(0.05)
        took = time.perf_counter() - started
    finally:
        for proc in procs:
            await common.stop_cli_worker(proc)
        await redis.aclose()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs in all, per run")
    parser.add_argument("--repeat", type=int, default=2)
    options = parser.parse_args()
    cluster = Cluster(3)
    try:
        rows = []
        for label, count in (("one namespace, 2 processes", 1), ("2 namespaces on 2 shards", 2)):
            rates = []
            for run in range(options.repeat):
                names = [f"{{{tag}}}r{run}" for tag in tags_on_distinct_primaries(cluster, count)]
                took = asyncio.run(drain(cluster.url, names, options.jobs // count))
                rates.append(options.jobs / took)
            rows.append((label, rates))
        print(
            f"| layout ({options.jobs:,} no-op jobs, 2 workers x c=50) | jobs/s (median) | runs |"
        )
        print("| --- | ---: | --- |")
        for label, rates in rows:
            shown = ", ".join(f"{r:,.0f}" for r in rates)
            print(f"| {label} | {common.median(rates):,.0f} | {shown} |")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
