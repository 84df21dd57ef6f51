"""One processor: take a job, run it through the middleware chain, settle it.

A cancellation of ours (shutdown) is never a failure: it spends no retry, and
the job stays on the in-progress list for the shutdown's requeue. Anything
else a handler raises, any ``BaseException`` (``SystemExit``,
``KeyboardInterrupt``, a ``CancelledError`` of its own making), is that job's
failure, filed by its retry option: no handler can end the worker.

A plain ``def`` runs in a thread (``threads.py``: never abandoned on a timeout,
waited for or left running at shutdown); a job recovered from a dead process
more than once runs alone (``suspects.py``).

Abort (``abort_listener.py`` hears of it, ``aborting.py`` acts): a job goes
through three phases (``RunningJob.phase``). Before its handler starts, an
abort marks it and the handler never starts; while an ``async def``'s handler
is awaited, an abort cancels that await (the only moment the processor's task
is ever cancelled for one), and a plain ``def``'s thread is marked; once the
handler has returned or raised, the job is *finishing* (its ack, result or
failure on their way) and an abort is too late. An aborted job is filed as
aborted (never retried) when it ends, whatever it ended with. A job never
aborted pays two attribute stores and one attribute test, and one empty-dict
test before it runs.

Here: the loop each processor runs and ``process()``, a plain job's whole
path. The invoke step is ``invoke_step.py``, a tracked job's run
``tracked_run.py``, the aborted-job handling ``aborted_jobs.py``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import anyio
import orjson

from cogworker_async import payload
from cogworker_async.context import set_current
from cogworker_async.jobs import JobRegistry
from cogworker_async.limits import LIMIT_SLOTS, BackOff
from cogworker_async.middleware import ServerMiddleware
from cogworker_async.periodic.running import PJID, PeriodicRuns
from cogworker_async.store.commands import End
from cogworker_async.unique import DeferredReleases
from cogworker_async.worker.aborted_jobs import AbortedJobs
from cogworker_async.worker.aborting import (
    FINISHING,
    IN_HANDLER,
    ended_by_abort,
)
from cogworker_async.worker.backoff import BackOffs
from cogworker_async.worker.fetcher import Fetcher
from cogworker_async.worker.freeze import NEVER_FROZEN as _NEVER_FROZEN
from cogworker_async.worker.freeze import FreezeGuard
from cogworker_async.worker.job_locks import JobLocks
from cogworker_async.worker.running_job import RunningJob
from cogworker_async.worker.settlement import Settler
from cogworker_async.worker.suspects import SUSPECT_PREFIX, Suspects
from cogworker_async.worker.threads import HandlerThreads, cancelled_by_us
from cogworker_async.worker.tracking import Tracker
from cogworker_async.workflows.results import RESULTS_OF

# Importable from here as before (tests, the abort logic's docs).
__all__ = ["Processors", "RunningJob"]


def _nothing() -> None:
    return None


class Processors(AbortedJobs):
    """Shared state of a worker's processors, and the loop each one runs."""

    def __init__(
        self,
        fetcher: Fetcher,
        settler: Settler,
        registry: JobRegistry,
        middleware: list[ServerMiddleware],
        *,
        default_timeout: float | None,
        concurrency: int,
        logger: logging.Logger,
        alone_wait: float | None = None,
        tracker: Tracker | None = None,
        history: bool = False,
        periodic: PeriodicRuns | None = None,
        releases: DeferredReleases | None = None,
        freeze: FreezeGuard | None = None,
    ) -> None:
        self._fetcher = fetcher
        # After a heartbeat gap, what is about to start is checked first (freeze.py).
        self.freeze = freeze
        # The metrics history: each success's name, minute and run time go
        # with its ack (aggregated per call, counted by the script that acks).
        self._history = history
        self._settler = settler
        self._registry = registry
        self._middleware = middleware
        self._default_timeout = default_timeout
        # Status and results: only jobs that ask pay for them (one flag check).
        self._tracker = tracker
        self._track_all = tracker is not None and tracker.all
        if tracker is not None:
            tracker.send_start = fetcher.send_start  # "working" rides the next fetch
            tracker.take_start = fetcher.take_start
            fetcher.on_end_failures = tracker.ends_failed
        # Periodic jobs (a payload with periodic_pjid): their running lock and result.
        # Jobs that hold a lock (periodic runs, unique jobs): their start and end.
        self._locks = JobLocks(
            fetcher, fetcher.keys, periodic=periodic, releases=releases, history=history
        )
        self._log = logger
        self._backoffs = BackOffs(fetcher, logger)
        self._debug = logger.isEnabledFor(logging.DEBUG)
        self.running: dict[int, RunningJob] = {}
        # Every job a processor has taken and not yet settled, running or not.
        self.claimed: dict[int, bytes] = {}
        # Jobs a shutdown's cancellation cut off before they were settled. On the
        # list in reliable fetch (requeued with it); basic fetch has none, so the
        # shutdown gives these back itself.
        self.interrupted: list[bytes] = []
        # Sync handlers' threads, and the shutdown's hold on them.
        self._threads = HandlerThreads(concurrency=concurrency, logger=logger)
        self._suspects = Suspects(
            fetcher,
            settler,
            self.running,
            self.process,
            concurrency=concurrency,
            logger=logger,
            alone_wait=alone_wait,
            on_cut_off=self._note_cut_off,
        )
        # Read on every job: kept here, one attribute away.
        self._no_suspect_running = self._suspects.none_running
        self._quiet = self._suspects.quiet
        # Jobs whose thread was left running: kept on the list by the shutdown.
        self.left_running = self._threads.left_running
        # Abort: each processor's task (cancelled for an async job it runs), and
        # jids announced as aborted that ran nowhere here yet (jid -> when heard),
        # refused if they come (a fetched job waiting for a processor).
        self._tasks: dict[int, asyncio.Task[Any]] = {}
        self.pending_aborts: dict[str, float] = {}
        # Told of every start (the heartbeat's early beat, so Busy shows the job).
        self.on_start: Callable[[], None] = _nothing

    async def drain_tracking(self) -> None:
        """Wait (bounded) for status writes still out, before the connection closes."""
        if self._tracker is not None:
            await self._tracker.status.drain()

    def snapshot(self) -> dict[str, str]:
        """What each slot runs now, for the heartbeat's workers hash (read from its thread)."""
        return {
            str(slot): orjson.dumps(
                {
                    "queue": (running.job or {}).get("queue"),
                    "payload": running.raw.decode("utf-8", "replace"),
                    "run_at": running.started,
                }
            ).decode()
            for slot, running in list(self.running.items())
        }

    def hold_threads(self) -> None:
        """Our processors are about to be cancelled: wait for the threads they run."""
        self._threads.hold()

    def release_threads(self) -> None:
        """A second stop: stop waiting for threads; their jobs stay on the list."""
        self._threads.release()

    async def run(self, slot: int) -> None:
        """Run jobs until the fetcher is closed."""
        fetcher = self._fetcher
        claimed = self.claimed
        task = asyncio.current_task()
        if task is not None:
            self._tasks[slot] = task
        freeze = self.freeze or _NEVER_FROZEN
        monotonic = time.monotonic
        while True:
            raw = await fetcher.get()
            if raw is None:
                return
            # Ours from here on, even while it waits for a suspect to finish:
            # never judged a stray (see Reconciler).
            claimed[slot] = raw
            try:
                # A plain job pays this one test (see freeze.py).
                if monotonic() > freeze.fresh_until and not await self._admitted(raw):
                    continue
                if raw.startswith(SUSPECT_PREFIX) or not self._no_suspect_running.is_set():
                    await self._beside_suspects(slot, raw)
                else:
                    await self.process(slot, raw)
            except asyncio.CancelledError as exc:
                if cancelled_by_us(exc):
                    raise  # a shutdown's, or the cancellation of the task running the worker
                # Nobody of ours asked for it (an abort only ever cancels a handler's
                # await, which process() takes back): it must not end this processor.
                self._log.error(
                    "processor %d: a stray cancellation escaped its job, ignored: %.200r",
                    slot,
                    raw,
                )
            finally:
                del claimed[slot]

    async def _admitted(self, raw: bytes) -> bool:
        """Whether a job may start after a heartbeat gap (False: recovery took it back)."""
        assert self.freeze is not None
        try:
            return await self.freeze.admit(raw)
        except BaseException as exc:  # why: re-raised; a stop's cut is only noted
            self._note_cut_off(raw, exc)
            raise

    def running_jids(self) -> set[str]:
        """The jids of the jobs running here now."""
        return {r.job["jid"] for r in list(self.running.values()) if r.job is not None}

    async def _beside_suspects(self, slot: int, raw: bytes) -> None:
        """A job marked as a suspect, or any job while a suspect runs alone (never a
        plain job's path): run alone, or once the suspect is done."""
        if raw.startswith(SUSPECT_PREFIX):
            try:
                suspect = await self._suspects.is_suspect(raw)
            except BaseException as exc:  # why: re-raised; a stop's cut is only noted
                self._note_cut_off(raw, exc)
                raise
            if suspect:
                await self._suspects.run_alone(slot, raw)  # notes its own cut-offs
                return
        if not self._no_suspect_running.is_set():
            try:
                await self._no_suspect_running.wait()
            except BaseException as exc:  # why: re-raised; a stop's cut is only noted
                self._note_cut_off(raw, exc)
                raise
        await self.process(slot, raw)

    def _note_cut_off(self, raw: bytes, exc: BaseException) -> None:
        """A job not yet settled whose processor the shutdown cancelled: see ``interrupted``."""
        if cancelled_by_us(exc):
            self.interrupted.append(raw)

    async def process(self, slot: int, raw: bytes) -> None:
        try:
            job = payload.decode(raw)
        except payload.PayloadError as exc:
            self._log.error("unparseable job buried in dead (%s): %.200r", exc, raw)
            await self._settler.file(self._settler.unparseable_filing(raw, str(exc)))
            return
        if self.pending_aborts and job["jid"] in self.pending_aborts:
            await self._refuse_aborted(slot, raw, job)
            return
        started = time.time()
        self.running[slot] = running = RunningJob(raw, job, started)
        self.on_start()
        # A job that holds something (a periodic entry's run, a unique job, a
        # batch membership, a limit's slot) is minded at its start and its end;
        # a plain job pays these four lookups.
        locked = PJID in job or "unique" in job or "batch" in job or LIMIT_SLOTS in job
        end: End | None = None  # a tracked job's result and final status, for its ack
        try:
            if locked:
                pending = self._locks.started(job, raw)
                if pending is not None:  # the common case awaits no coroutine
                    await pending
            function = self._registry.get(job["class"])
            set_current(job)
            if self._debug:
                self._log.debug("jid=%s %s start queue=%s", job["jid"], job["class"], job["queue"])
            # Inlined _tracked(): a plain job pays these flag checks, not a call.
            if (
                self._track_all
                or "status" in job
                or "keep_result" in job
                or (function is not None and function.tracks)
            ):
                end = await self._run_tracked(slot, raw, job, function, started)
            elif (
                function is not None
                and function.is_async
                and not running.aborted  # (aborted while a lock was taken: never started)
                and not self._middleware
                and RESULTS_OF not in job  # a chord's callback: its arguments are read first
                and not (job.get("timeout") or function.defaults.timeout or self._default_timeout)
            ):
                # The common case, without one coroutine or partial more than it needs.
                running.phase = IN_HANDLER
                await function.fn(*(job.get("args") or ()), **(job.get("kwargs") or {}))
            else:
                await self._run(running, function)
        except BaseException as exc:  # why: our cancellation is re-raised
            running.phase = FINISHING  # an abort from now on is too late
            if running.aborted and ended_by_abort(running, self._tasks.get(slot), exc):
                await self._file_aborted(slot, running)
                return
            if cancelled_by_us(exc):
                self.interrupted.append(raw)  # unsettled: basic fetch gives it back
                raise
            # The job's own failure, whatever it is: SystemExit, its own
            # CancelledError... none of them ends this worker. Logged once, with
            # its traceback, by the settler (it knows whether this was the last try).
            if isinstance(exc, BackOff):
                with anyio.CancelScope(shield=True):
                    if await self._backoffs.held_back(raw, job, exc):
                        return
            function = self._registry.get(job["class"])
            filing = self._settler.failed(raw, job, exc, function, time.time() - started)
            # Shielded: a shutdown cancelling us now would leave a job that ran
            # and failed to be requeued as if it never ran (bounded by the
            # socket timeout; an outage keeps it pending).
            with anyio.CancelScope(shield=True):
                if await self._settler.file(filing):
                    # Aborted while its failure was filed: settled as aborted, not retried.
                    if self._tracker is not None and self._tracked(job, function):
                        await self._tracker.aborted(slot, job, function)
                    return
                if self._tracker is not None and self._tracked(job, function):
                    await self._tracker.failed(slot, job, function, exc, filing)
                if locked:
                    await self._locks.failed(job, filing, type(exc).__name__)
        else:
            running.phase = FINISHING  # an abort from now on is too late
            if running.aborted:  # marked (before its handler, or its thread), or a swallowed cancel
                ended_by_abort(running, self._tasks.get(slot), None)
                await self._file_aborted(slot, running)
                return
            if locked:
                pending = self._locks.succeeded(raw, job, started, end)
                if pending is not None:
                    await pending
            elif self._history:
                self._fetcher.ack(raw, job["jid"], (job["class"], started, time.time()), end=end)
            else:
                self._fetcher.ack(raw, job["jid"], end=end)
            if self._debug:
                self._log.debug(
                    "jid=%s %s done queue=%s in %.3f s",
                    job["jid"],
                    job["class"],
                    job["queue"],
                    time.time() - started,
                )
        finally:
            del self.running[slot]
            if not self.running:
                self._quiet.set()
