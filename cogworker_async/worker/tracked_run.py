"""A tracked job's run: its status written around it and its return value kept
(see ``tracking.py``). Only jobs that ask take this path.

A mixin of ``Processors`` (methods on the class: no call more per job).
"""

from __future__ import annotations

from typing import Any

from cogworker_async.jobs import JobFunction
from cogworker_async.store.commands import End
from cogworker_async.worker.aborting import IN_HANDLER
from cogworker_async.worker.fetcher import Fetcher
from cogworker_async.worker.invoke_step import InvokeStep
from cogworker_async.worker.running_job import RunningJob
from cogworker_async.worker.tracking import Tracker
from cogworker_async.workflows.results import RESULTS_OF


class TrackedRun(InvokeStep):
    """``_tracked`` and ``_run_tracked`` of the processors (state set by ``Processors``)."""

    _fetcher: Fetcher
    _tracker: Tracker | None
    _track_all: bool
    running: dict[int, RunningJob]

    def _tracked(self, job: dict[str, Any], function: JobFunction[Any, Any] | None) -> bool:
        """Does this job keep a result or track its status? (The plain job's cost: this.)"""
        return (
            self._track_all
            or "status" in job
            or "keep_result" in job
            or (function is not None and function.tracks)
        )

    async def _run_tracked(
        self,
        slot: int,
        raw: bytes,
        job: dict[str, Any],
        function: JobFunction[Any, Any] | None,
        started: float,
    ) -> End | None:
        """``_run`` with its status written around it and its return value kept: in
        reliable fetch, the result and final status are returned for the ack to
        write (in its own step); in basic fetch (no list to leave) written now."""
        tracker = self._tracker
        running = self.running[slot]
        if tracker is None:  # a payload asking, in a worker built without a tracker
            await self._run(running, function)
            return None
        wants = tracker.wants_status(job, function)  # asked once, for both ends
        tracker.started(slot, job, function, started, wants)
        box: list[Any] = [None]
        if (
            function is not None
            and function.is_async
            and not running.aborted
            and not self._middleware
            and RESULTS_OF not in job  # a chord's callback: its arguments are read first
            and not (job.get("timeout") or function.defaults.timeout or self._default_timeout)
        ):
            # The common case, as process() runs a plain job's: no layer between.
            running.phase = IN_HANDLER
            box[0] = await function.fn(*(job.get("args") or ()), **(job.get("kwargs") or {}))
        else:
            await self._run(running, function, box)
        if running.aborted:
            return None  # filed as aborted by process(), its result not kept
        if self._fetcher.reliable:
            if wants and tracker.progress.in_flight(job["jid"]):  # none reported: no await
                await tracker.progress.landed(job["jid"])
            return tracker.success_end(slot, job, function, box[0], wants)
        await tracker.succeeded(slot, job, function, box[0])
        return None
