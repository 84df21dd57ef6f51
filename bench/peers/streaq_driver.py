"""streaq under the peers harness (``_harness.py``). Runs with ``bench/.peers/streaq/bin/python``.

Configuration: ``streaq.Worker(redis_url, concurrency=...)`` run with
``Worker.run_async()`` in the process's asyncio loop (what ``streaq run``
does), ``handle_signals=False`` (the harness stops it); tasks registered with
``ttl=0`` (no result stored; the default keeps it 5 minutes) and
``silent=True`` (no per-task log line); everything else at streaq's defaults
(prefetch = 2 x concurrency, pickle serialization, asyncio backend). Jobs go
in with ``Worker.enqueue_many`` (streaq's bulk pipeline) for throughput and
one ``await task.enqueue(...)`` each for latency.

    python bench/peers/streaq_driver.py --redis-url URL --workload noop|io|latency
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import _harness as h
from streaq import Worker

TASK_OPTIONS: dict[str, Any] = {"ttl": 0, "silent": True}


def build(url: str, concurrency: int, started: asyncio.Event | None = None) -> Any:
    """A Worker with the three tasks registered; returns (worker, noop, sleep, latency)."""

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        if started is not None:
            started.set()
        yield None

    worker = Worker(redis_url=url, concurrency=concurrency, handle_signals=False, lifespan=lifespan)

    @worker.task(name="noop", **TASK_OPTIONS)
    async def noop(i: int) -> None:
        h.noop(i)

    @worker.task(name="sleep", **TASK_OPTIONS)
    async def sleep(i: int, seconds: float) -> None:
        await h.sleep(i, seconds)

    @worker.task(name="latency", **TASK_OPTIONS)
    async def latency(i: int, sent_at: float) -> None:
        h.latency(i, sent_at)

    return worker, noop, sleep, latency


class StreaqDriver:
    name = "streaq"

    def __init__(self) -> None:
        self.options: dict[str, str] = {}
        self._worker: Any = None

    def versions(self) -> dict[str, str]:
        return {n: h.version_of(n) for n in ("streaq", "coredis", "anyio")}

    def settings(self, workload: h.Workload) -> dict[str, Any]:
        return {
            "Worker": f"Worker(concurrency={workload.concurrency}, handle_signals=False), "
            "run_async(); other settings default (prefetch 2 x concurrency)",
            "tasks": "@worker.task(ttl=0, silent=True)",
            "results": "none stored (ttl=0)",
            "enqueue": "Worker.enqueue_many in chunks of 1,000 (one pipeline each)",
        }

    async def enqueue_all(self, url: str, workload: h.Workload) -> None:
        worker, noop, sleep, _ = build(url, workload.concurrency)
        async with worker:
            for start in range(0, workload.jobs, 1000):
                ids = range(start, min(start + 1000, workload.jobs))
                if workload.sleep:
                    tasks = [sleep.enqueue(i, workload.sleep) for i in ids]
                else:
                    tasks = [noop.enqueue(i) for i in ids]
                await worker.enqueue_many(tasks)

    @contextlib.asynccontextmanager
    async def producer(self, url: str) -> AsyncIterator[h.Send]:
        worker, _, _, latency = build(url, 1)
        async with worker:

            async def send(i: int, sent_at: float) -> None:
                await latency.enqueue(i, sent_at)

            yield send

    async def serve(
        self, url: str, workload: h.Workload, started: asyncio.Event, stop: asyncio.Event
    ) -> None:
        self._worker, *_ = build(url, workload.concurrency, started)
        running = asyncio.create_task(self._worker.run_async())
        try:
            await h.until_stopped(stop, running)
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running

    async def unfinished(self, url: str, workload: h.Workload) -> int:
        # Finished tasks are XACKed and XDELed from the stream: what is left is unfinished.
        return int(await self._worker.queue_size())


if __name__ == "__main__":
    h.main(StreaqDriver())
