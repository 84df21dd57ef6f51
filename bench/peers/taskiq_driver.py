"""taskiq + taskiq-redis under the peers harness (``_harness.py``).

Runs with ``bench/.peers/taskiq/bin/python``.

Configuration: ``taskiq_redis.RedisStreamBroker`` (the broker with
acknowledgements: XREADGROUP on a consumer group, XACK after the task), no
result backend (taskiq's default: nothing stored), and the worker built the
way ``taskiq worker`` builds it in each worker process: ``is_worker_process``
set, then ``taskiq.receiver.Receiver(broker, executor=ThreadPoolExecutor(),
max_async_tasks=<concurrency>, max_prefetch=0, ack_type=WHEN_SAVED)`` (the
CLI's defaults apart from ``--max-async-tasks``) and ``receiver.listen()``.
One process, not the CLI's default of two, so that every library gets one
worker process; the CLI would also pick uvloop if installed, which is not
installed in any peer's virtualenv (all run on asyncio). Broker settings at
their defaults (xread_count=100, xread_block=2000 ms). ``task.kiq()`` per job
(taskiq has no bulk enqueue), 100 in flight at a time.

    python bench/peers/taskiq_driver.py --redis-url URL --workload noop|io|latency
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import _harness as h
from redis.asyncio import Redis
from taskiq import TaskiqEvents
from taskiq.acks import AcknowledgeType
from taskiq.receiver import Receiver
from taskiq_redis import RedisStreamBroker

QUEUE = "taskiq"  # RedisStreamBroker's default stream and consumer group names
GROUP = "taskiq"


def build(url: str) -> Any:
    """The broker with the three tasks registered; returns (broker, noop, sleep, latency)."""
    broker = RedisStreamBroker(url, queue_name=QUEUE, consumer_group_name=GROUP)

    @broker.task(task_name="noop")
    async def noop(i: int) -> None:
        h.noop(i)

    @broker.task(task_name="sleep")
    async def sleep(i: int, seconds: float) -> None:
        await h.sleep(i, seconds)

    @broker.task(task_name="latency")
    async def latency(i: int, sent_at: float) -> None:
        h.latency(i, sent_at)

    return broker, noop, sleep, latency


class TaskiqDriver:
    name = "taskiq"

    def __init__(self) -> None:
        self.options: dict[str, str] = {}
        self._redis: Redis | None = None

    def versions(self) -> dict[str, str]:
        return {n: h.version_of(n) for n in ("taskiq", "taskiq-redis", "redis", "hiredis")}

    def settings(self, workload: h.Workload) -> dict[str, Any]:
        return {
            "broker": "RedisStreamBroker (consumer group, XACK), no result backend",
            "Worker": f"Receiver(max_async_tasks={workload.concurrency}, max_prefetch=0, "
            "ack_type=WHEN_SAVED, ThreadPoolExecutor) + listen(), as `taskiq worker` "
            "builds it, one process",
            "results": "none stored (no result backend)",
            "enqueue": "task.kiq, 100 concurrent calls (no bulk API)",
        }

    async def enqueue_all(self, url: str, workload: h.Workload) -> None:
        broker, noop, sleep, _ = build(url)
        await broker.startup()  # declares the consumer group, as a client app does
        try:
            if workload.sleep:
                calls = (sleep.kiq(i, workload.sleep) for i in range(workload.jobs))
            else:
                calls = (noop.kiq(i) for i in range(workload.jobs))
            await h.gather_chunked(calls)
        finally:
            await broker.shutdown()

    @contextlib.asynccontextmanager
    async def producer(self, url: str) -> AsyncIterator[h.Send]:
        broker, _, _, latency = build(url)
        await broker.startup()

        async def send(i: int, sent_at: float) -> None:
            await latency.kiq(i, sent_at)

        try:
            yield send
        finally:
            await broker.shutdown()

    async def serve(
        self, url: str, workload: h.Workload, started: asyncio.Event, stop: asyncio.Event
    ) -> None:
        broker, *_ = build(url)
        broker.is_worker_process = True

        @broker.on_event(TaskiqEvents.WORKER_STARTUP)
        async def on_startup(state: Any) -> None:
            started.set()

        finish = asyncio.Event()
        with ThreadPoolExecutor() as executor:
            receiver = Receiver(
                broker=broker,
                executor=executor,
                validate_params=True,
                max_async_tasks=workload.concurrency,
                max_prefetch=0,
                propagate_exceptions=True,
                ack_type=AcknowledgeType.WHEN_SAVED,
            )
            running = asyncio.create_task(receiver.listen(finish))
            try:
                await h.until_stopped(stop, running)
            finally:
                finish.set()
                try:
                    await asyncio.wait_for(running, 10)
                finally:
                    await asyncio.wait_for(broker.shutdown(), 5)
                    if self._redis is not None:
                        await self._redis.aclose()

    async def unfinished(self, url: str, workload: h.Workload) -> int:
        if self._redis is None:
            self._redis = Redis.from_url(url)
        # Delivered but not yet XACKed, plus never delivered (the group's lag).
        pending = (await self._redis.xpending(QUEUE, GROUP))["pending"]
        groups = await self._redis.xinfo_groups(QUEUE)
        lag = sum(int(g.get("lag") or 0) for g in groups if g["name"] in (GROUP, GROUP.encode()))
        return int(pending) + lag


if __name__ == "__main__":
    h.main(TaskiqDriver())
