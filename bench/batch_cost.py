"""What a batch member costs against a plain job: 20,000 no-op jobs drained by one
worker (concurrency 50), enqueued plain or as the members of one batch,
alternating in one process (same-run pairs).

A member pays, at its ack, its hold in the ack's script call (``SREM`` from the
batch's pending set, ``HINCRBY`` of its count, ``SCARD``), and at enqueue one
``batch_add.lua`` call per 500 members instead of a pipelined push.

    python bench/batch_cost.py [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
from typing import Any

import common
import jobs

from cogworker_async import Client, Settings

TOTAL = 20_000
CONCURRENCY = 50


async def run_once(url: str, as_batch: bool) -> dict[str, float]:
    namespace = common.new_namespace("batch-cost")
    args = [(i,) for i in range(TOTAL)]
    try:
        async with Client(Settings(redis_url=url, namespace=namespace)) as client:
            with common.Stopwatch() as enqueue:
                if as_batch:
                    async with client.batch() as batch:
                        await batch.enqueue_many(jobs.noop, args)
                else:
                    await client.enqueue_many(jobs.noop, args)
            worker = await common.WorkerProc.start(
                redis_url=url,
                namespace=namespace,
                queues=("default",),
                concurrency=CONCURRENCY,
                target=TOTAL,
            )
            try:
                report = await worker.report()
            finally:
                worker.kill()
            if as_batch:
                status = await client.batch_status(batch.bid)
                if status is None or status["state"] != "success":
                    raise RuntimeError(f"the batch did not end as a success: {status}")
    finally:
        await common.cleanup(url, namespace)
    wall, cpu, redis_cpu = report["wall_s"], report["cpu_s"], report["redis_cpu_s"]
    return {
        "jobs_per_s": TOTAL / wall,
        "cpu_us_per_job": cpu / TOTAL * 1e6,
        "redis_cpu_us_per_job": redis_cpu / TOTAL * 1e6,
        "enqueue_jobs_per_s": TOTAL / enqueue.seconds,
    }


async def bench(url: str, repeat: int) -> list[common.Result]:
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(repeat):
        for as_batch in (False, True):  # alternating: both see the same machine
            runs[as_batch].append(await run_once(url, as_batch))
    metrics = [
        ("jobs_per_s", "processed", "jobs/s"),
        ("cpu_us_per_job", "worker CPU", "µs/job"),
        ("redis_cpu_us_per_job", "redis-server CPU", "µs/job"),
        ("enqueue_jobs_per_s", "enqueue", "jobs/s"),
    ]
    params: dict[str, Any] = {"jobs": TOTAL, "concurrency": CONCURRENCY}
    return [
        common.collect(
            f"batch-cost-{'member' if as_batch else 'plain'}",
            f"noop {'batch members' if as_batch else 'plain jobs'} (20,000, c=50)",
            params,
            runs[as_batch],
            metrics,
        )
        for as_batch in (False, True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async: batch member vs plain job")
    common.add_common_args(parser)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        results = common.run_async(bench(url, args.repeat))
    common.emit(results, as_json=args.json)


if __name__ == "__main__":
    main()
