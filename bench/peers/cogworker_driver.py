"""cogworker_async under the peers harness (``_harness.py``), measured exactly like the peers.

Runs with the interpreter that has ``cogworker_async`` installed (the runner's
own). Default settings except the concurrency; one queue (``default``).

    python bench/peers/cogworker_driver.py --redis-url URL --workload noop|io|latency
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import _harness as h

from cogworker_async import Client, Settings, Worker, job

NAMESPACE = "peers-cogworker"


@job(name="peers.noop")
async def noop(i: int) -> None:
    h.noop(i)


@job(name="peers.sleep")
async def sleep(i: int, seconds: float) -> None:
    await h.sleep(i, seconds)


@job(name="peers.latency")
async def latency(i: int, sent_at: float) -> None:
    h.latency(i, sent_at)


def _settings(url: str, concurrency: int = 10) -> Settings:
    return Settings(redis_url=url, namespace=NAMESPACE, concurrency=concurrency)


class CogworkerDriver:
    name = "cogworker_async"

    def __init__(self) -> None:
        self.options: dict[str, str] = {}
        self._client: Client | None = None

    def versions(self) -> dict[str, str]:
        return {
            "cogworker-async": h.version_of("cogworker-async"),
            "redis": h.version_of("redis"),
            "hiredis": h.version_of("hiredis"),
        }

    def settings(self, workload: h.Workload) -> dict[str, Any]:
        return {
            "Worker": f"Settings(concurrency={workload.concurrency}), other settings default",
            "fetch": "reliable (BLMOVE + batched fetch-and-ack script)",
            "results": "none stored (the library keeps no results)",
            "enqueue": "Client.enqueue_many (one pipeline)",
        }

    async def enqueue_all(self, url: str, workload: h.Workload) -> None:
        async with Client(_settings(url)) as client:
            if workload.sleep:
                await client.enqueue_many(
                    sleep, [(i, workload.sleep) for i in range(workload.jobs)]
                )
            else:
                await client.enqueue_many(noop, [(i,) for i in range(workload.jobs)])

    @contextlib.asynccontextmanager
    async def producer(self, url: str) -> AsyncIterator[h.Send]:
        async with Client(_settings(url)) as client:

            async def send(i: int, sent_at: float) -> None:
                await client.enqueue(latency, i, sent_at)

            yield send

    async def serve(
        self, url: str, workload: h.Workload, started: asyncio.Event, stop: asyncio.Event
    ) -> None:
        worker = Worker(_settings(url, workload.concurrency), jobs=[noop, sleep, latency])
        running = asyncio.create_task(worker.run())
        try:
            await worker.started.wait()
            started.set()
            await stop.wait()
        finally:
            worker.stop()
            await running
            if self._client is not None:
                await self._client.close()

    async def unfinished(self, url: str, workload: h.Workload) -> int:
        if self._client is None:
            self._client = Client(_settings(url))
        processed = await self._client.redis.get(self._client.keys.stats_processed)
        return max(0, workload.jobs - int(processed or 0))


if __name__ == "__main__":
    h.main(CogworkerDriver())
