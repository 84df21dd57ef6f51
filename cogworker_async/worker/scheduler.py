"""The scheduled poller: due entries of the schedule and retry sets onto their queues.

Entries move oldest first in bounded batches, each atomically (``graduate.lua``).
One that can't be pushed is deferred rather than retried first on every poll;
one that can't be read is buried in dead with its raw text.
"""

from __future__ import annotations

import logging
import time

import orjson
from redis.asyncio import Redis

from cogworker_async import payload
from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import Graduation

BATCH = 100
MAX_BATCHES_PER_POLL = 50
DEFER_SECONDS = 60.0


class ScheduledPoller:
    def __init__(self, redis: Redis, keys: Keys, logger: logging.Logger) -> None:
        self._redis = redis
        self._keys = keys
        self._log = logger

    async def poll_once(self) -> int:
        """Move everything due now; returns how many entries moved."""
        moved = 0
        for source in (self._keys.schedule, self._keys.retry):
            for _ in range(MAX_BATCHES_PER_POLL):
                count, full = await self._move_batch(source)
                moved += count
                if not full:
                    break
        return moved

    async def _move_batch(self, source: str) -> tuple[int, bool]:
        now = time.time()
        due: list[bytes] = await self._redis.zrangebyscore(  # type: ignore[assignment]
            source, "-inf", now, start=0, num=BATCH
        )
        items: list[Graduation] = []
        for entry in due:
            try:
                job = payload.decode(entry)
            except payload.PayloadError as exc:
                dead_entry = payload.unparseable_entry(entry, f"in {source}: {exc}")
                if await commands.bury(
                    self._redis, self._keys, source=source, entry=entry, dead_entry=dead_entry
                ):
                    self._log.error("unparseable entry of %s buried in dead (%s)", source, exc)
                continue
            job["enqueued_at"] = now
            items.append(Graduation(entry, orjson.dumps(job), job["queue"]))
        if items:
            result = await commands.graduate(
                self._redis, self._keys, source=source, items=items, defer=DEFER_SECONDS
            )
            for queue in result.deferred_queues:
                self._log.error(
                    "a due job of %s could not be pushed onto queue %r (a key of the wrong type?): "
                    "deferred %.0f s",
                    source,
                    queue,
                    DEFER_SECONDS,
                )
            return result.moved, len(due) == BATCH
        return 0, len(due) == BATCH
