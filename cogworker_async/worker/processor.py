"""One processor: take a job, run it through the middleware chain, settle it.

A cancellation of ours (shutdown) is never a failure: it spends no retry, and
the job stays on the in-progress list for the shutdown's requeue. Anything
else a handler raises, any ``BaseException`` (``SystemExit``,
``KeyboardInterrupt``, a ``CancelledError`` of its own making), is that job's
failure, filed by its retry option: no handler can end the worker.

A plain ``def`` runs in a thread (``threads.py``: never abandoned on a timeout,
waited for or left running at shutdown); a job recovered from a dead process
more than once runs alone (``suspects.py``).

Abort (``abort_listener.py`` hears of it, ``aborting.py`` acts): a running
``async def`` is cancelled in its processor's task, a plain ``def`` is marked;
either is filed as aborted (never retried) when it ends, whatever it ended
with. A job never aborted pays one attribute test after it runs and one
empty-dict test before.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import anyio
import orjson

from cogworker_async import payload
from cogworker_async.context import set_current
from cogworker_async.errors import JobTimeout, UnknownJob
from cogworker_async.jobs import JobFunction, JobRegistry
from cogworker_async.middleware import Next, ServerMiddleware, wrap_server_chain
from cogworker_async.periodic.running import PJID, PeriodicRuns
from cogworker_async.unique import DeferredReleases
from cogworker_async.worker.aborting import (
    MARKED,
    NOT_ABORTED,
    abort_in,
    ended_by_abort,
)
from cogworker_async.worker.fetcher import Fetcher
from cogworker_async.worker.job_locks import JobLocks
from cogworker_async.worker.settlement import Settler
from cogworker_async.worker.suspects import SUSPECT_PREFIX, Suspects
from cogworker_async.worker.threads import HandlerThreads, cancelled_by_us
from cogworker_async.worker.tracking import Tracker


class RunningJob:
    """What a processor runs now (its raw bytes are how it is known on the list).

    ``aborted``: MARKED (filed as aborted when it ends: a plain ``def``'s
    thread can't be stopped) or CANCELLED (its processor's task was
    cancelled for it). ``settling``: it ran, its settlement is being sent; an
    abort now would cut that short, so it is too late for one.
    """

    __slots__ = ("aborted", "job", "raw", "settling", "started")

    def __init__(self, raw: bytes, job: dict[str, Any] | None, started: float) -> None:
        self.raw = raw
        self.job = job
        self.started = started
        self.aborted = NOT_ABORTED
        self.settling = False


class Processors:
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
    ) -> None:
        self._fetcher = fetcher
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
        # Periodic jobs (a payload with periodic_pjid): their running lock and result.
        # Jobs that hold a lock (periodic runs, unique jobs): their start and end.
        self._locks = JobLocks(fetcher, periodic=periodic, releases=releases, history=history)
        self._log = logger
        self._debug = logger.isEnabledFor(logging.DEBUG)
        self.running: dict[int, RunningJob] = {}
        # Every job a processor has taken and not yet settled, running or not.
        self.claimed: dict[int, bytes] = {}
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
        while True:
            raw = await fetcher.get()
            if raw is None:
                return
            # Ours from here on, even while it waits for a suspect to finish:
            # never judged a stray (see Reconciler).
            claimed[slot] = raw
            try:
                if raw.startswith(SUSPECT_PREFIX) and await self._suspects.is_suspect(raw):
                    await self._suspects.run_alone(slot, raw)
                    continue
                if not self._no_suspect_running.is_set():
                    await self._no_suspect_running.wait()
                await self.process(slot, raw)
            finally:
                del claimed[slot]

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
        # A job that holds a lock (a periodic entry's run, a unique job) is
        # minded at its start and its end; a plain job pays these two lookups.
        locked = PJID in job or "unique" in job
        lock = ""
        try:
            if locked:
                lock = await self._locks.started(job)
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
                await self._run_tracked(slot, raw, job, function, started)
            elif (
                function is not None
                and function.is_async
                and not self._middleware
                and not (job.get("timeout") or function.defaults.timeout or self._default_timeout)
            ):
                # The common case, without one coroutine or partial more than it needs.
                await function.fn(*(job.get("args") or ()), **(job.get("kwargs") or {}))
            else:
                await self._run(raw, job, function)
        except BaseException as exc:  # why: our cancellation is re-raised
            if running.aborted and ended_by_abort(running, self._tasks.get(slot), exc):
                await self._file_aborted(slot, running)
                return
            if cancelled_by_us(exc):
                raise
            # The job's own failure, whatever it is: SystemExit, its own
            # CancelledError... none of them ends this worker.
            self._log.warning(
                "jid=%s %s failed queue=%s after %.3f s: %s: %s",
                job["jid"],
                job["class"],
                job["queue"],
                time.time() - started,
                type(exc).__name__,
                exc,
            )
            function = self._registry.get(job["class"])
            filing = self._settler.failure_filing(raw, job, exc, function)
            running.settling = True
            # Shielded: a shutdown cancelling us now would leave a job that ran
            # and failed to be requeued as if it never ran (bounded by the
            # socket timeout; an outage keeps it pending).
            with anyio.CancelScope(shield=True):
                await self._settler.file(filing)
                if self._tracker is not None and self._tracked(job, function):
                    await self._tracker.failed(slot, job, function, exc, filing)
                if locked:
                    await self._locks.failed(job, filing, type(exc).__name__)
        else:
            if running.aborted:  # a thread marked, or a handler that swallowed our cancel
                ended_by_abort(running, self._tasks.get(slot), None)
                await self._file_aborted(slot, running)
                return
            if locked:
                await self._locks.succeeded(raw, job, started, lock)
            elif self._history:
                self._fetcher.ack(raw, job["jid"], (job["class"], started, time.time()))
            else:
                self._fetcher.ack(raw, job["jid"])
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

    def abort(self, jid: str) -> bool:
        """Abort job ``jid`` if a processor here runs it (see ``aborting.abort_in``)."""
        return abort_in(self.running, self._tasks, self._registry, jid, self._log)

    async def _file_aborted(self, slot: int, running: RunningJob) -> None:
        """File an aborted job (shielded, as a failure is): settled, not retried."""
        job = running.job
        assert job is not None
        running.settling = True
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
    ) -> None:
        """``_run`` with its status written around it and its return value kept."""
        tracker = self._tracker
        if tracker is None:  # a payload asking, in a worker built without a tracker
            await self._run(raw, job, function)
            return
        tracker.started(slot, job, function, started)
        box: list[Any] = [None]
        await self._run(raw, job, function, box)
        running = self.running.get(slot)
        if running is not None:
            if running.aborted:
                return  # filed as aborted by process(), its result not kept
            running.settling = True
        await tracker.succeeded(slot, job, function, box[0])

    async def _run(
        self,
        raw: bytes,
        job: dict[str, Any],
        function: JobFunction[Any, Any] | None,
        box: list[Any] | None = None,
    ) -> None:
        """The job through the middleware chain, with its timeout; its return value
        goes into ``box`` when one is given."""
        if function is None:
            # Through the chain like any failure, so middleware (metrics,
            # tracing, status) sees unknown names too.
            innermost: Next = functools.partial(_unknown, job["class"], self._registry)
        else:
            timeout = job.get("timeout") or function.defaults.timeout or self._default_timeout
            innermost = functools.partial(self._invoke, function, raw, job, timeout, box)
        if self._middleware:
            await wrap_server_chain(self._middleware, job, innermost)()
        else:
            await innermost()

    async def _invoke(
        self,
        function: JobFunction[Any, Any],
        raw: bytes,
        job: dict[str, Any],
        limit: float | None,
        box: list[Any] | None = None,
    ) -> None:
        args = job.get("args") or ()
        kwargs = job.get("kwargs") or {}
        if not function.is_async:
            call = functools.partial(function.fn, *args, **kwargs)
            if box is not None:
                call = functools.partial(_into, box, call)
            await self._threads.run(raw, job, call, None if limit is None else float(limit))
            return
        if limit is None:
            value = await function.fn(*args, **kwargs)
            if box is not None:
                box[0] = value
            return
        try:
            async with asyncio.timeout(float(limit)) as scope:
                value = await function.fn(*args, **kwargs)
            if box is not None:
                box[0] = value
        except TimeoutError:
            if scope.expired():
                raise JobTimeout(f"ran past its timeout of {limit} s") from None
            raise


def _into(box: list[Any], call: Callable[[], Any]) -> None:
    box[0] = call()


async def _unknown(name: str, registry: JobRegistry) -> None:
    names = registry.names
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.8)
    if close:
        hint = f" (did you mean {close[0]!r}?)"
    else:
        hint = f" (it knows {len(names)} job{'' if len(names) == 1 else 's'})"
    raise UnknownJob(f"no handler registered for {name!r} in this worker{hint}")
