"""Jobs of ours put back on their queues, to run next here or elsewhere.

Two callers: a suspect that must not wait on our in-progress list while
another runs alone, and jobs fetched a batch ahead that turned out not to be
quick (they would sit in one worker while others idle).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands


class GiveBack:
    def __init__(
        self, redis: Redis, keys: Keys, *, identity: str, default_queue: str, logger: logging.Logger
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._identity = identity
        self._default_queue = default_queue
        self._log = logger
        # Being given back in the background: still on our list, still ours.
        self.pending: list[bytes] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def one(self, raw: bytes) -> bool:
        """Put one job of ours back on its queue (it runs next).

        True when it is no longer ours: moved back, or already gone from the
        list (another process's requeue moved it). False when the call failed:
        it is still ours, and the caller keeps it.
        """
        try:
            await commands.requeue_one(
                self._redis,
                self._keys,
                identity=self._identity,
                raw=raw,
                default_queue=self._default_queue,
            )
        except Exception as exc:  # noqa: BLE001 - the caller keeps the job instead
            self._log.warning("could not give a job back to its queue (%s): kept", exc)
            return False
        return True

    def later(self, jobs: Sequence[bytes], keep: Callable[[Sequence[bytes]], None]) -> None:
        """Give ``jobs`` back in the background, in this order; ``keep`` gets any that fail."""
        self.pending.extend(jobs)
        task = asyncio.get_running_loop().create_task(self._all(list(jobs), keep))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _all(self, jobs: list[bytes], keep: Callable[[Sequence[bytes]], None]) -> None:
        for job in jobs:
            given = await self.one(job)
            self.pending.remove(job)
            if not given:
                keep([job])  # still ours: run it here after all
