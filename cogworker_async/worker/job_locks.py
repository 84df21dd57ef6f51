"""What a processor does for a job that holds a lock: a periodic entry's run
(``periodic_pjid`` in its payload) or a unique job (``unique``).

A plain job never reaches this module: the processor tests for the two fields
once at the job's start and once at its end. The locks themselves are
released in the Lua step that settles the job (see docs/design.md, "Unique
jobs: where each lock is released"); this module hands the processor's part
of that to the fetcher's ack, or to ``DeferredReleases`` where no such step
exists.
"""

from __future__ import annotations

import time
from typing import Any

from cogworker_async.periodic.running import PJID, PeriodicRuns
from cogworker_async.store.commands import Filing
from cogworker_async.unique import DeferredReleases, release_of
from cogworker_async.worker.fetcher import Fetcher


class JobLocks:
    """The start, success and failure of a job that holds a lock."""

    def __init__(
        self,
        fetcher: Fetcher,
        *,
        periodic: PeriodicRuns | None,
        releases: DeferredReleases | None,
        history: bool,
    ) -> None:
        self._fetcher = fetcher
        self._periodic = periodic
        self._releases = releases
        self._history = history

    async def started(self, job: dict[str, Any]) -> str:
        """A periodic run re-takes its running lock (returned: released with its
        ack). A unique ``until_executing`` job releases its lock now (awaited:
        the lock is gone before the handler runs); ``until_executed`` releases
        it in the step that settles it: its ack or, failed for good, its filing.
        Owner-checked; a failed release is deferred."""
        if "unique" in job and self._releases is not None:
            at_start = release_of(job, terminal=False)
            if at_start is not None:
                await self._releases.release(at_start)
        if PJID in job and self._periodic is not None:
            return await self._periodic.started(job)
        return ""

    async def succeeded(self, raw: bytes, job: dict[str, Any], started: float, lock: str) -> None:
        """Ack a success with its lock released in the ack's own step (the
        periodic run's ``lock``, or a unique job's); a periodic run's result is
        recorded. In basic fetch an ack removes nothing and is not sent at
        shutdown: a unique lock's release goes out on its own, coalesced."""
        run = (job["class"], started, time.time()) if self._history else None
        release = None if lock or "unique" not in job else release_of(job, terminal=True)
        if release is not None and self._fetcher.reliable:
            lock = release.key
        self._fetcher.ack(raw, job["jid"], run, lock)
        if release is not None and not self._fetcher.reliable and self._releases is not None:
            self._releases.release_soon(release)
        if self._periodic is not None and PJID in job:
            await self._periodic.record(job, "ok")

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
