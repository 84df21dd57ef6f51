"""The scheduled poller: due entries of the schedule and retry sets onto their queues.

Entries move oldest first in bounded batches, each atomically (``graduate.lua``).
One that can't be pushed is deferred rather than retried first on every poll;
one that can't be read is buried in dead with its raw text.

On time, without polling faster. Each look reads Redis's clock and the
earliest entry of both sets (one pipeline: ``TIME`` and two ``ZRANGE 0 0``);
the poller then sleeps until that entry is due, bounded by its scaled poll
interval, on a local timer (Redis's own blocking timeouts fire up to 1/hz s
late). A producer whose entry becomes the earliest of its set touches the
wake-up marker (``Keys.schedule_wakeup``, scored with the entry's due time);
a listener blocked on it (``BZPOPMIN``, its own connection) hands the time to
the poller, which looks then. Only one poller pops a touch, and a poller
whose due-time look found the entries already moved by another one leaves
the next due time to it (once), so processes don't all wake for every entry.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

import anyio
import orjson
from redis.asyncio import Redis

from cogworker_async import payload
from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import Graduation
from cogworker_async.store.connection import is_cluster
from cogworker_async.store.faults import FailureLog

BATCH = 100
MAX_BATCHES_PER_POLL = 50
DEFER_SECONDS = 60.0
LISTEN_RETRY = 1.0
# Wake this much after the due time on our clock: Redis's clock, carried over
# by an offset measured at the last look, is known to within half a round trip.
WAKE_SLACK = 0.001


def _is_due(earliest: float | None, now: float) -> bool:
    return earliest is not None and earliest <= now


class ScheduledPoller:
    def __init__(self, redis: Redis, keys: Keys, logger: logging.Logger) -> None:
        self._redis = redis
        self._keys = keys
        self._log = logger
        # Redis's clock minus time.monotonic(), from the last TIME (until then,
        # the host's clock stands in for Redis's).
        self._offset = time.time() - time.monotonic()
        # The earliest due time seen (Redis's clock), and when that is on ours.
        self._due: float | None = None
        self._due_at = 0.0
        self._woke_for: float | None = None  # the due time the last wait ended for
        self._changed = anyio.Event()

    # --- the duty's pass --------------------------------------------------------
    async def poll_once(self) -> int:
        """Move everything due now, then plan the next look.

        Returns how many due entries it dealt with: moved, deferred or buried.
        """
        woke_for, self._woke_for = self._woke_for, None
        # A wake-up arriving during this pass lands here and is kept.
        self._due = None
        now, earliest = await self._look()
        handled = 0
        if _is_due(earliest, now):
            handled = await self._move_due(now)
            now, earliest = await self._look()
            if handled == 0 and (woke_for is not None or _is_due(earliest, now)):
                # Another poller moved them first (leave the next due time
                # to it, once), or what is due can't move: no spin on it.
                earliest = None
        elif woke_for is not None and (earliest is None or earliest > woke_for):
            earliest = None  # woke for an entry another poller moved: leave the next to it
        if earliest is not None:
            self._note(earliest)
        return handled

    async def _look(self) -> tuple[float, float | None]:
        """Redis's clock now, and when the earliest entry of schedule or retry is due."""
        # A cluster pipeline refuses TIME (it has no key): asked on its own
        # there, of any node (their clocks only set when to look again).
        cluster = is_cluster(self._redis)
        sent = time.monotonic()
        clock = [await self._redis.time()] if cluster else []
        async with self._redis.pipeline(transaction=False) as pipe:
            if not cluster:
                pipe.time()
            pipe.zrange(self._keys.schedule, 0, 0, withscores=True)
            pipe.zrange(self._keys.retry, 0, 0, withscores=True)
            replies = clock + await pipe.execute(raise_on_error=False)
        received = time.monotonic()
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply  # Redis's own error (WRONGTYPE wakes the key guard), not the pipeline's
        (seconds, micros), first_scheduled, first_retry = replies
        now = seconds + micros / 1e6
        self._offset = now - (sent + received) / 2
        scores = [float(score) for _, score in (*first_scheduled, *first_retry)]
        return now, min(scores) if scores else None

    def _note(self, due: float) -> None:
        """Look again when ``due`` (Redis's clock) comes, unless an earlier look is planned."""
        if self._due is None or due < self._due:
            self._due = due
            self._due_at = due - self._offset + WAKE_SLACK
            self._changed.set()

    # --- waiting ------------------------------------------------------------------
    async def wait(self, seconds: float) -> None:
        """The duty's sleep: ``seconds``, or until the earliest entry seen is due
        (a wake-up marker may bring an earlier one meanwhile)."""
        end = time.monotonic() + seconds
        while True:
            self._changed = anyio.Event()
            due = self._due
            target = self._due_at if due is not None and self._due_at < end else end
            left = target - time.monotonic()
            if left <= 0:
                self._woke_for = due if target < end else None
                return
            with anyio.move_on_after(left):
                await self._changed.wait()

    async def listen(
        self,
        blocking: Redis,
        block_for: Callable[[], float],
        rng: random.Random,
        on_wrong_type: Callable[[], None] | None = None,
    ) -> None:
        """Block on the wake-up marker (``blocking``: a connection of its own) and plan a
        look at each due time popped; runs until cancelled."""
        failures = FailureLog("Scheduled poller wake-up", self._log, on_wrong_type=on_wrong_type)
        while True:
            try:
                reply = await blocking.bzpopmin([self._keys.schedule_wakeup], block_for())
            except Exception as exc:  # noqa: BLE001 - the listener must outlive any one failure
                failures.failed(exc)
                await anyio.sleep(LISTEN_RETRY * (0.5 + rng.random()))
                continue
            failures.succeeded()
            if reply is not None:
                self._note(float(reply[2]))

    # --- moving ---------------------------------------------------------------------
    async def _move_due(self, now: float) -> int:
        handled = 0
        for source in (self._keys.schedule, self._keys.retry):
            for _ in range(MAX_BATCHES_PER_POLL):
                count, full = await self._move_batch(source, now)
                handled += count
                if not full:
                    break
        return handled

    async def _move_batch(self, source: str, now: float) -> tuple[int, bool]:
        """Entries due at ``now`` (Redis's clock), oldest first: (how many were moved,
        deferred or buried, whether the batch was full)."""
        due: list[bytes] = await self._redis.zrangebyscore(  # type: ignore[assignment]
            source, "-inf", now, start=0, num=BATCH
        )
        enqueued_at = time.time()
        buried = 0
        items: list[Graduation] = []
        for entry in due:
            try:
                job = payload.decode(entry)
            except payload.PayloadError as exc:
                dead_entry = payload.unparseable_entry(entry, f"in {source}: {exc}")
                if await commands.bury(
                    self._redis, self._keys, source=source, entry=entry, dead_entry=dead_entry
                ):
                    buried += 1
                    self._log.error("unparseable entry of %s buried in dead (%s)", source, exc)
                continue
            job["enqueued_at"] = enqueued_at
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
            handled = result.moved + len(result.deferred_queues) + buried
            return handled, len(due) == BATCH
        return buried, len(due) == BATCH
