"""What a processor does for a job that holds a lock: a periodic entry's run
(``periodic_pjid`` in its payload), a unique job (``unique``) or a job with a
concurrency limit's slot (``limit_slots``).

A plain job never reaches this module: the processor tests for the fields
once at the job's start and once at its end. The locks themselves are
released in the Lua step that settles the job (see docs/design.md, "Unique
jobs: where each lock is released"); this module hands the processor's part
of that to the fetcher's ack, or to ``DeferredReleases`` where no such step
exists.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import Any

from cogworker_async import holds
from cogworker_async.holds import Event
from cogworker_async.keys import Keys
from cogworker_async.periodic.running import PJID, PeriodicRuns
from cogworker_async.store import batches
from cogworker_async.store.commands import End, Filing
from cogworker_async.unique import DeferredReleases, release_of
from cogworker_async.unique.lock import Release, foreign_lock, unique_for_of
from cogworker_async.unique.renewals import FetchRenewals
from cogworker_async.worker.fetcher import Fetcher


class JobLocks:
    """The start, success and failure of a job that holds a lock."""

    def __init__(
        self,
        fetcher: Fetcher,
        keys: Keys,
        *,
        periodic: PeriodicRuns | None,
        releases: DeferredReleases | None,
        history: bool,
    ) -> None:
        self._fetcher = fetcher
        self._keys = keys
        self._periodic = periodic
        self._releases = releases
        self._history = history
        # Lock keys a payload names are used only under it ("" admits none).
        self._prefix = releases.lock_prefix if releases is not None else ""
        # The fetch renews an until_executed job's lock as it takes it.
        self._fetch_renewals = None
        if self._prefix:
            self._fetch_renewals = FetchRenewals(
                self._prefix, logging.getLogger("cogworker_async.unique")
            )
            fetcher.renewals = self._fetch_renewals
        self._log = logging.getLogger("cogworker_async.unique")

    def started(self, job: dict[str, Any], raw: bytes = b"") -> Awaitable[Any] | None:
        """A periodic run re-takes its running lock (settled with its ack or
        filing, as its other holds). A unique ``until_executing`` job releases
        its lock now (awaited: the lock is gone before the handler runs);
        ``until_executed`` has it renewed for ``unique_for`` by the fetch that
        took it (in that step) or, when it waited longer since (or came by
        another way), from now (awaited, coalesced): a wait or run longer than
        the TTL it was enqueued with lets no second copy in. It releases it in
        the step that settles it: its ack or, failed for good, its filing.
        Owner-checked; a failed release is deferred.

        Returns what the processor must await first, or None: the common case
        (a lock the fetch renewed) awaits no coroutine."""
        pending: Awaitable[Any] | None = None
        if "unique" in job and self._releases is not None:
            pending = self._unique_started(job, raw, self._releases)
        if PJID in job and self._periodic is not None:
            periodic = self._periodic.started(job)
            pending = periodic if pending is None else _in_turn(pending, periodic)
        return pending

    def _unique_started(
        self, job: dict[str, Any], raw: bytes, releases: DeferredReleases
    ) -> Awaitable[None] | None:
        field = job["unique"]
        # As release_of reads the mode: only "until_executing" gives it back now.
        executing = isinstance(field, dict) and field.get("mode") == "until_executing"
        lock = release_of(job, terminal=not executing, prefix=self._prefix)
        if lock is None:
            self._foreign(job)
            return None
        if executing:
            return releases.release(lock)
        unique_for = unique_for_of(job)
        renewals = self._fetch_renewals
        if renewals is None or not renewals.fresh(raw, unique_for):
            return releases.renewals.renew(lock, unique_for)
        return None

    def _foreign(self, job: dict[str, Any]) -> None:
        key = foreign_lock(job, self._prefix)
        if key is not None:
            self._log.error(
                "jid=%s %s: its unique lock key %r is not under %s: not a lock of ours, "
                "never written (the job runs unlocked)",
                job.get("jid"),
                job.get("class"),
                key,
                self._prefix,
            )

    def succeeded(
        self, raw: bytes, job: dict[str, Any], started: float, end: End | None = None
    ) -> Awaitable[None] | None:
        """Ack a success with what it holds (a unique lock, a periodic run's running
        lock) settled in the ack's own step; a periodic run's result is recorded.
        In basic fetch an ack removes nothing and is not sent at shutdown: the
        releases go out on their own, coalesced. Returns what the processor
        must await, or None (a unique job's ack awaits nothing)."""
        run = (job["class"], started, time.time()) if self._history else None
        if self._fetcher.reliable:
            bid = holds.batch_member(job)
            if bid is not None:  # a batch member, holding nothing else: no Hold built
                self._fetcher.ack(raw, job["jid"], run, end=end, member=bid)
                return None
            slots = holds.slots_only(job)
            if slots is not None:  # a limited job, holding its slots only: no Hold built
                self._fetcher.ack(raw, job["jid"], run, end=end, slots=slots)
                return None
        held = holds.read(job, self._keys)
        pending: Awaitable[None] | None = None
        if self._fetcher.reliable or self._releases is None:
            self._fetcher.ack(raw, job["jid"], run, held, end)
        else:
            self._fetcher.ack(raw, job["jid"], run, end=end)
            for hold in holds.released(held, Event.ACK):
                self._releases.release_soon(Release(hold.key, hold.owner))
            counted = [hold for hold in held if holds.kind_of(hold).outcomes is not None]
            if counted:
                pending = self._count_ends(job, counted)
        if self._periodic is not None and PJID in job:
            record = self._periodic.record(job, "ok")
            pending = record if pending is None else _in_turn(pending, record)
        return pending

    async def _count_ends(self, job: dict[str, Any], counted: list[holds.Hold]) -> None:
        # Basic fetch: the ack settles no hold, so a batch member's success is
        # counted by a call of its own. Best effort, as basic fetch is: a failure
        # is logged (its batch then waits for an operator).
        try:
            await batches.end_members(self._fetcher.redis, self._keys, counted, Event.ACK)
        except Exception as exc:  # noqa: BLE001 - the job succeeded; its count is side work
            self._log.error(
                "jid=%s: its batch could not count its success (%s: %s)",
                job.get("jid"),
                type(exc).__name__,
                exc,
            )

    async def failed(self, job: dict[str, Any], filing: Filing, error: str) -> None:
        """A failed periodic run's result, as ``periodic list`` shows it (its lock
        went, or stays for the retry, with the filing)."""
        if self._periodic is None or PJID not in job:
            return
        if filing.target is None:
            outcome = "failed, discarded"
        elif filing.target.endswith(":dead"):
            outcome = "failed, dead"
        else:
            outcome = "failed, will retry"
        await self._periodic.record(job, outcome, error)


async def _in_turn(first: Awaitable[Any], then: Awaitable[Any]) -> None:
    """Await ``first``, then ``then`` (a job that holds two kinds of lock)."""
    await first
    await then
