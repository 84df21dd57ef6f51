"""Whether a live process reads an entry's queue: a periodic job pushed where nobody
fetches piles up silently, so the ticker says so (once per entry, and once more
when it is read again) and ``periodic list`` shows it.

Read from ``<ns>:live_queues`` (queue -> when a live process last said it reads
it, on Redis's clock), which every heartbeat stamps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.periodic.entries import Entry
from cogworker_async.store.faults import is_outage

LIVE_WINDOW = 60.0
"""A queue stamped this recently (s, Redis's clock) is read by a live process."""
CHECK_EVERY = 60.0
"""How often the ticker looks again (s): one small pipeline, off every job's path."""


async def unread_queues(redis: Redis, keys: Keys, queues: Iterable[str], now: float) -> set[str]:
    """Those of ``queues`` no live process has said it reads within ``LIVE_WINDOW``."""
    names = sorted(set(queues))
    if not names:
        return set()
    async with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.zscore(keys.live_queues, name)
        stamps = await pipe.execute(raise_on_error=False)
    unread = set()
    for name, stamp in zip(names, stamps, strict=True):
        if isinstance(stamp, Exception):
            if is_outage(stamp):
                raise stamp
            # A wrong-typed live_queues (the key guard moves it): unknown, not unread;
            # this check is advice and must never stop a tick.
            continue
        if stamp is None or float(stamp) < now - LIVE_WINDOW:
            unread.add(name)
    return unread


class UnreadQueueWarnings:
    """The ticker's side: checks now and then, logs each change once per queue (naming
    the entries that push there: 2,000 entries on one unread queue are one line)."""

    def __init__(self, entries: Sequence[Entry], logger: logging.Logger) -> None:
        self._by_queue: dict[str, list[str]] = {}
        for entry in entries:
            self._by_queue.setdefault(entry.queue, []).append(entry.name)
        self._log = logger
        self._unread: set[str] = set()  # queues said to be unread
        self._due = float("-inf")

    async def check(self, redis: Redis, keys: Keys, now: float) -> None:
        """Look at most every ``CHECK_EVERY`` s (Redis's clock ``now``)."""
        if now < self._due:
            return
        self._due = now + CHECK_EVERY
        unread = await unread_queues(redis, keys, self._by_queue, now)
        for queue, names in self._by_queue.items():
            shown = ", ".join(names[:10]) + (
                f", ... ({len(names)} entries)" if len(names) > 10 else ""
            )
            if queue in unread and queue not in self._unread:
                self._unread.add(queue)
                self._log.warning(
                    "Periodic entries push their jobs onto queue %r, which no live process "
                    "reads: they pile up there until a worker reads it (-q %s): %s",
                    queue,
                    queue,
                    shown,
                )
            elif queue not in unread and queue in self._unread:
                self._unread.discard(queue)
                self._log.info("Periodic entries' queue %r is read again: %s", queue, shown)
