"""SAQ under the peers harness (``_harness.py``). Runs with ``bench/.peers/saq/bin/python``.

Configuration: ``saq.Worker`` on a Redis ``saq.Queue``, started the way
``saq`` starts it (``queue.connect()`` then ``worker.start()``), with
``concurrency`` = the workload's; everything else at SAQ's defaults
(``dequeue_timeout=0``: each of the ``concurrency`` process tasks blocks in
``BLMOVE``; upkeep timers as shipped). Jobs are enqueued with ``ttl=-1``,
SAQ's documented "disabled" value, so no job record or result is kept after
completion (the default keeps both for 600 s). ``Queue.enqueue`` per job (SAQ
has no bulk enqueue), 100 in flight at a time.

    python bench/peers/saq_driver.py --redis-url URL --workload noop|io|latency
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import _harness as h
from saq import Queue, Worker

NO_RESULTS = -1  # Job.ttl: -1 disables keeping the job (and its result) after it finishes


async def noop(ctx: dict[str, Any], *, i: int) -> None:
    h.noop(i)


async def sleep(ctx: dict[str, Any], *, i: int, seconds: float) -> None:
    await h.sleep(i, seconds)


async def latency(ctx: dict[str, Any], *, i: int, sent_at: float) -> None:
    h.latency(i, sent_at)


FUNCTIONS = [("noop", noop), ("sleep", sleep), ("latency", latency)]


class SaqDriver:
    name = "saq"

    def __init__(self) -> None:
        self.options: dict[str, str] = {}
        self._queue: Any = None

    def versions(self) -> dict[str, str]:
        return {n: h.version_of(n) for n in ("saq", "redis", "hiredis")}

    def settings(self, workload: h.Workload) -> dict[str, Any]:
        return {
            "Worker": f"Worker(queue, functions, concurrency={workload.concurrency}), "
            "other settings default (dequeue_timeout=0: blocking BLMOVE per process task)",
            "results": "none kept: jobs enqueued with ttl=-1 (default 600 s)",
            "enqueue": "Queue.enqueue, 100 concurrent calls (no bulk API)",
        }

    async def enqueue_all(self, url: str, workload: h.Workload) -> None:
        queue = Queue.from_url(url)
        await queue.connect()
        try:
            if workload.sleep:
                calls = (
                    queue.enqueue("sleep", i=i, seconds=workload.sleep, ttl=NO_RESULTS)
                    for i in range(workload.jobs)
                )
            else:
                calls = (queue.enqueue("noop", i=i, ttl=NO_RESULTS) for i in range(workload.jobs))
            await h.gather_chunked(calls)
        finally:
            await queue.disconnect()

    @contextlib.asynccontextmanager
    async def producer(self, url: str) -> AsyncIterator[h.Send]:
        queue = Queue.from_url(url)
        await queue.connect()

        async def send(i: int, sent_at: float) -> None:
            await queue.enqueue("latency", i=i, sent_at=sent_at, ttl=NO_RESULTS)

        try:
            yield send
        finally:
            await queue.disconnect()

    async def serve(
        self, url: str, workload: h.Workload, started: asyncio.Event, stop: asyncio.Event
    ) -> None:
        async def startup(ctx: dict[str, Any]) -> None:
            started.set()

        self._queue = queue = Queue.from_url(url)
        worker = Worker(queue, FUNCTIONS, concurrency=workload.concurrency, startup=startup)
        await queue.connect()
        running = asyncio.create_task(worker.start())
        try:
            await h.until_stopped(stop, running)
        finally:
            await worker.stop()
            await asyncio.wait_for(running, 10)
            await queue.disconnect()

    async def unfinished(self, url: str, workload: h.Workload) -> int:
        return int(await self._queue.count("incomplete"))


if __name__ == "__main__":
    h.main(SaqDriver())
