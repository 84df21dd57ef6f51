"""The processors' aborted-job handling: an abort heard for a job running here,
and the filing of a job that ended aborted or arrived already announced as
aborted (never run). The decision of what an abort does is ``aborting.py``'s.

A mixin of ``Processors`` (methods on the class: no call more per job).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import anyio

from cogworker_async.worker.aborting import FINISHING, MARKED, abort_in
from cogworker_async.worker.running_job import RunningJob
from cogworker_async.worker.settlement import Settler
from cogworker_async.worker.tracked_run import TrackedRun


class AbortedJobs(TrackedRun):
    """``abort`` and the aborted filings of the processors (state set by ``Processors``)."""

    _settler: Settler
    _tasks: dict[int, asyncio.Task[Any]]
    _log: logging.Logger
    _quiet: asyncio.Event

    def abort(self, jid: str) -> bool:
        """Abort job ``jid`` if a processor here runs it (see ``aborting.abort_in``)."""
        return abort_in(self.running, self._tasks, self._registry, jid, self._log)

    async def _file_aborted(self, slot: int, running: RunningJob) -> None:
        """File an aborted job (shielded, as a failure is): settled, not retried."""
        job = running.job
        assert job is not None
        running.phase = FINISHING
        self._log.warning(
            "jid=%s %s aborted queue=%s after %.3f s: filed as aborted, not retried",
            job["jid"],
            job["class"],
            job["queue"],
            time.time() - running.started,
        )
        function = self._registry.get(job["class"])
        with anyio.CancelScope(shield=True):
            await self._settler.file(self._settler.aborted_filing(running.raw, job))
            if self._tracker is not None and self._tracked(job, function):
                await self._tracker.aborted(slot, job, function)

    async def _refuse_aborted(self, slot: int, raw: bytes, job: dict[str, Any]) -> None:
        """A job announced as aborted reached a processor: filed as aborted, never run."""
        running = RunningJob(raw, job, time.time())
        running.aborted = MARKED
        self.running[slot] = running
        try:
            await self._file_aborted(slot, running)
        finally:
            del self.running[slot]
            if not self.running:
                self._quiet.set()
