"""Coalesced pushes: the jobs enqueued by many tasks in one event-loop turn ride one
``enqueue`` script call per queue instead of one round trip each."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import enqueues

# Payloads per script call: a bounded argument list however many were pushed.
PUSH_CHUNK = 1000


class Pushes:
    """Pushes encoded jobs onto their queues, coalesced per loop turn."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self._batch: dict[str, list[tuple[bytes, asyncio.Future[None]]]] = {}
        self._flush_started = False
        self._flushes: set[asyncio.Task[None]] = set()

    async def push(self, queue: str, encoded: bytes) -> None:
        """Push one job; returns once it is in Redis (or raises what the call raised).

        Each caller still returns only once its own job is in Redis.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._batch.setdefault(queue, []).append((encoded, future))
        if not self._flush_started:
            self._flush_started = True
            task = loop.create_task(self._flush_batch())
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)
        await future

    async def _flush_batch(self) -> None:
        # A task runs from the next loop turn: every push made in this turn
        # (this one's included) is in the batch it takes.
        self._flush_started = False
        batch, self._batch = self._batch, {}
        await self._flush(batch)

    async def _flush(self, batch: dict[str, list[tuple[bytes, asyncio.Future[None]]]]) -> None:
        for queue, items in batch.items():
            for start in range(0, len(items), PUSH_CHUNK):
                chunk = items[start : start + PUSH_CHUNK]
                try:
                    await enqueues.push(self.redis, self.keys, queue, [job for job, _ in chunk])
                except Exception as exc:  # noqa: BLE001 - handed to each waiting caller
                    for _, future in chunk:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for _, future in chunk:
                    if not future.done():
                        future.set_result(None)
