"""Renewals at run start: an ``until_executed`` job's lock renewed for its
``unique_for`` from the moment its run starts, owner-checked (taken again when
it ran out while the job waited; a newer copy's left alone), so neither a long
wait nor a long run lets a second copy run beside it.

Awaited before the handler runs, as ``until_executing``'s release at start
is, and coalesced the same way: the renewals asked for in one event-loop turn
(jobs a fetch handed out together) go as one ``renew_unique.lua`` call, one
call in flight at a time. Awaited because the lock is released in the step
that settles the job (its ack, its filing), on other connections: a renewal
still on its way could land after that release and take the free lock again
for a job that is done. A failed call is logged and the runs go on (the lock
is a guard beside the run, not a condition of it).

Most jobs need none of it: ``fetch.lua`` renews the lock of each
``until_executed`` job it takes, in the step that moves it onto the
in-progress list (``FetchRenewals``), so a job that starts soon after its
fetch costs no call at its start; only one that waited longer in its process
(or came by another way) is renewed here.
"""

from __future__ import annotations

import asyncio
import logging
import time

from redis.asyncio import Redis

from cogworker_async.store import locks
from cogworker_async.store.commands import Renewal
from cogworker_async.unique.lock import Release

BATCH_MAX = 500  # renewals per renew_unique.lua call

_Asked = tuple[Release, float, "asyncio.Future[None]"]


class LockRenewals:
    """The run-start renewals of one worker, coalesced per event-loop turn."""

    def __init__(self, redis: Redis, logger: logging.Logger) -> None:
        self._redis = redis
        self._log = logger
        self._batch: list[_Asked] = []
        self._flushing: asyncio.Task[None] | None = None

    async def renew(self, lock: Release, ttl: float) -> None:
        """Renew ``lock`` for ``ttl`` s from now; returns once the call that carried
        it answered (or failed: logged); never raises (but cancellation)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._batch.append((lock, ttl, future))
        if self._flushing is None:
            # From the next loop turn: every renewal asked for in this one rides along.
            self._flushing = asyncio.get_running_loop().create_task(self._flush())
        await asyncio.shield(future)

    async def _flush(self) -> None:
        batch: list[_Asked] = []
        try:
            while self._batch:
                batch, self._batch = self._batch[:BATCH_MAX], self._batch[BATCH_MAX:]
                await self._send(batch)
                _resolve(batch)
                batch = []
        finally:
            # Cancelled (the loop closing): no caller is left waiting.
            left, self._batch = [*batch, *self._batch], []
            self._flushing = None
            _resolve(left)

    async def _send(self, batch: list[_Asked]) -> None:
        try:
            holders = await locks.renew_unique(
                self._redis, [(lock.key, lock.jid, ttl) for lock, ttl, _ in batch]
            )
        except Exception as exc:  # noqa: BLE001 - best effort beside the runs: say so
            self._log.warning(
                "jid=%s: could not renew %d unique lock(s) at run start (%s: %s): running anyway",
                batch[0][0].jid,
                len(batch),
                type(exc).__name__,
                exc,
            )
            return
        for (lock, _, _), holder in zip(batch, holders, strict=True):
            if holder is None:
                self._log.error(
                    "jid=%s: its unique lock %s is not a string (not a lock): left alone, "
                    "running anyway",
                    lock.jid,
                    lock.key,
                )
            elif holder != lock.jid:
                self._log.warning(
                    "jid=%s: its unique lock %s is held by jid=%s (this copy's lock ran out "
                    "while it waited): running anyway",
                    lock.jid,
                    lock.key,
                    holder,
                )


def _resolve(batch: list[_Asked]) -> None:
    for _, _, future in batch:
        if not future.done():
            future.set_result(None)


# A fetch's renewal stands for the run's start when the job starts this soon
# after it: at most this share of its unique_for, and never more than
# FRESH_FOR_MAX s (a job that waited longer in its process is renewed again,
# awaited, at its start, as before).
FRESH_SHARE = 0.05
FRESH_FOR_MAX = 1.0
NOTED_MAX = 10_000  # renewals remembered before the stale ones are dropped


class FetchRenewals:
    """The unique locks ``fetch.lua`` renewed as it took their jobs (issue 22 §3):
    the renewal rides the fetch instead of an awaited call at each run's start.

    ``note`` records each (and logs a lock another copy holds, or a key that is
    no lock, as ``LockRenewals`` does); ``fresh`` tells the run's start whether
    that renewal still stands for it (taken, then started soon: the lock counts
    its unique_for from within ``FRESH_FOR_MAX`` s of the start)."""

    def __init__(self, prefix: str, logger: logging.Logger) -> None:
        self.prefix = prefix  # the unique locks' prefix the fetch renews under
        self._log = logger
        self._at: dict[bytes, float] = {}  # raw job -> when its fetch was answered

    def note(self, renewals: list[Renewal]) -> None:
        if not renewals:
            return
        now = time.monotonic()
        if len(self._at) >= NOTED_MAX:
            # Jobs given back or requeued never start: their entries go stale.
            self._at = {raw: at for raw, at in self._at.items() if now - at < FRESH_FOR_MAX}
        for renewal in renewals:
            self._at[renewal.raw] = now
            if renewal.holder is None:
                self._log.error(
                    "jid=%s: its unique lock is not a string (not a lock): left alone, "
                    "running anyway",
                    renewal.jid,
                )
            elif renewal.holder != renewal.jid:
                self._log.warning(
                    "jid=%s: its unique lock is held by jid=%s (this copy's lock ran out "
                    "while it waited): running anyway",
                    renewal.jid,
                    renewal.holder,
                )

    def fresh(self, raw: bytes, unique_for: float) -> bool:
        """The fetch renewed this job's lock moments ago (forgotten once asked)."""
        at = self._at.pop(raw, None)
        if at is None:
            return False
        return time.monotonic() - at <= min(FRESH_FOR_MAX, FRESH_SHARE * unique_for)
