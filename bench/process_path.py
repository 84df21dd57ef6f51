"""The plain path of ``Processors.process`` in-process, no Redis: ns per no-op job.

A stub fetcher takes the acks; the best of ``--passes`` passes over
``--jobs`` jobs is printed. For same-run comparisons of two trees under a busy
machine, where wall-clock throughput swings too much to compare:

    PYTHONPATH=/work/main python bench/process_path.py main
    PYTHONPATH=. python bench/process_path.py branch
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from typing import Any

from cogworker_async import job, payload
from cogworker_async.jobs import JobRegistry
from cogworker_async.worker.processor import Processors


@job(name="bench.process_path.noop")
async def noop(i: int) -> None:
    return None


class _StubFetcher:
    def __init__(self) -> None:
        self.acked = 0

    def ack(self, raw: bytes, jid: str) -> None:
        self.acked += 1


async def measure(jobs: int, passes: int) -> float:
    fetcher: Any = _StubFetcher()
    settler: Any = None  # never used: no job fails
    processors = Processors(
        fetcher,
        settler,
        JobRegistry([noop]),
        [],
        default_timeout=None,
        concurrency=10,
        logger=logging.getLogger("bench"),
    )
    now = time.time()
    raws = [
        payload.encode(payload.build(noop.name, [i], None, "default", now=now)) for i in range(jobs)
    ]
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        for raw in raws:
            await processors.process(0, raw)
        best = min(best, (time.perf_counter() - started) / jobs)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("label", nargs="?", default="", help="printed before the number")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=40)
    args = parser.parse_args()
    best = asyncio.run(measure(args.jobs, args.passes))
    print(f"{args.label} {best * 1e9:.0f} ns/job".strip())


if __name__ == "__main__":
    main()
