"""arq under the peers harness (``_harness.py``). Runs with ``bench/.peers/arq/bin/python``.

Configuration: ``arq.worker.Worker`` as ``arq`` would build it from a
``WorkerSettings`` class, with ``max_jobs`` = the workload's concurrency,
``keep_result=0`` (no result stored), ``log_results=False`` (no per-job log
line), ``handle_signals=False`` (the harness stops it); everything else at
arq's defaults, notably ``poll_delay=0.5`` s: arq polls its queue sorted set
(there is no blocking read) and reads at most ``queue_read_limit`` job ids per
poll, by default ``max(5 x max_jobs, 100)``. So with the defaults one worker
starts at most 250 jobs per 0.5 s at ``max_jobs=50`` (500 jobs/s), 1,000
jobs/s at 100. ``--set poll_delay=0.05`` runs the variant with a ten times
shorter poll (reported as its own row). Jobs go in with
``ArqRedis.enqueue_job`` (arq has no bulk enqueue), 100 calls in flight at a
time.

    python bench/peers/arq_driver.py --redis-url URL --workload noop|io|latency
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import _harness as h
from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.constants import default_queue_name
from arq.worker import Worker, func


async def noop(ctx: dict[str, Any], i: int) -> None:
    h.noop(i)


async def sleep(ctx: dict[str, Any], i: int, seconds: float) -> None:
    await h.sleep(i, seconds)


async def latency(ctx: dict[str, Any], i: int, sent_at: float) -> None:
    h.latency(i, sent_at)


FUNCTIONS = [func(noop, name="noop"), func(sleep, name="sleep"), func(latency, name="latency")]


class ArqDriver:
    name = "arq"

    def __init__(self) -> None:
        self._pool: ArqRedis | None = None
        self.options: dict[str, str] = {}

    @property
    def poll_delay(self) -> float:
        return float(self.options.get("poll_delay", 0.5))

    def versions(self) -> dict[str, str]:
        return {n: h.version_of(n) for n in ("arq", "redis", "hiredis")}

    def settings(self, workload: h.Workload) -> dict[str, Any]:
        return {
            "Worker": f"max_jobs={workload.concurrency}, keep_result=0, log_results=False, "
            f"handle_signals=False, poll_delay={self.poll_delay:g} "
            f"({'default' if self.poll_delay == 0.5 else 'default 0.5'}), other settings default",
            "fetch": "polls the queue sorted set every poll_delay; WATCH/MULTI per job start",
            "results": "none stored (keep_result=0)",
            "enqueue": "ArqRedis.enqueue_job, 100 concurrent calls (no bulk API)",
        }

    async def enqueue_all(self, url: str, workload: h.Workload) -> None:
        pool = await create_pool(RedisSettings.from_dsn(url))
        try:
            if workload.sleep:
                calls = (pool.enqueue_job("sleep", i, workload.sleep) for i in range(workload.jobs))
            else:
                calls = (pool.enqueue_job("noop", i) for i in range(workload.jobs))
            await h.gather_chunked(calls)
        finally:
            await pool.aclose()

    @contextlib.asynccontextmanager
    async def producer(self, url: str) -> AsyncIterator[h.Send]:
        pool = await create_pool(RedisSettings.from_dsn(url))

        async def send(i: int, sent_at: float) -> None:
            await pool.enqueue_job("latency", i, sent_at)

        try:
            yield send
        finally:
            await pool.aclose()

    async def serve(
        self, url: str, workload: h.Workload, started: asyncio.Event, stop: asyncio.Event
    ) -> None:
        async def on_startup(ctx: dict[str, Any]) -> None:
            started.set()

        worker = Worker(
            functions=FUNCTIONS,
            redis_settings=RedisSettings.from_dsn(url),
            max_jobs=workload.concurrency,
            keep_result=0,
            log_results=False,
            handle_signals=False,
            on_startup=on_startup,
            poll_delay=self.poll_delay,
        )
        running = asyncio.create_task(worker.async_run())
        try:
            await h.until_stopped(stop, running)
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            await worker.close()
            if self._pool is not None:
                await self._pool.aclose()

    async def unfinished(self, url: str, workload: h.Workload) -> int:
        if self._pool is None:
            self._pool = await create_pool(RedisSettings.from_dsn(url))
        return int(await self._pool.zcard(default_queue_name))


if __name__ == "__main__":
    h.main(ArqDriver())
