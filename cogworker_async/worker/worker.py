"""``Worker``: the lifecycle of one worker process (or one embedded worker).

Order of life: resolve the fetch mode, beat once, open the lifespan (if
given: ``worker/lifespan.py``), then start the duties and the processors. On
stop: no more fetching; running jobs get ``shutdown_timeout``; then they are
cancelled (not a failure) and this process's own in-progress list is requeued
at once, shielded, except jobs that finished but whose ack is still pending
(dropped: that is their ack), failures that could not be filed and jobs whose
thread was left running (both kept on the list for recovery). A plain ``def``
still in its thread when the wait ends is waited for (a thread can't be
cancelled) until it returns or a second ``stop()``. Only then do the heartbeat
keys go, and then the lifespan is closed.
"""

from __future__ import annotations

import logging
import os
import random
import socket
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType

import anyio
from anyio.abc import TaskGroup, TaskStatus
from redis.asyncio import Redis

from cogworker_async import limits
from cogworker_async.context import reset_worker_services, set_worker_services
from cogworker_async.jobs import JobRegistry, JobSpec
from cogworker_async.keys import Keys
from cogworker_async.middleware import ServerMiddleware
from cogworker_async.periodic.entries import Entry
from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect, discovered
from cogworker_async.worker import startup
from cogworker_async.worker.assembly import Parts, build_parts
from cogworker_async.worker.blocking import wait_name
from cogworker_async.worker.duties import start_duties
from cogworker_async.worker.heap import freeze_start_up_heap
from cogworker_async.worker.lifespan import Lifespan, LifespanRunner
from cogworker_async.worker.signals import stop_on_signals
from cogworker_async.worker.worker_stop import WorkerStop
from cogworker_async.workflows import FLOW_STEP

log = logging.getLogger("cogworker_async.worker")

# The longest ``async with worker:`` waits for the worker to run before the
# block goes on anyway (the worker keeps starting in the background).
ENTER_WAIT = 2.0


def new_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


class Worker(WorkerStop):
    """Runs jobs from Redis. ``await worker.run()``, or ``async with worker:`` beside an app."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        jobs: Iterable[JobSpec] | JobSpec = (),
        middleware: Sequence[ServerMiddleware] = (),
        logger: logging.Logger | None = None,
        handle_signals: bool | None = None,
        lifespan: Lifespan[Worker] | None = None,
        periodic: Sequence[Entry] = (),
    ) -> None:
        """``handle_signals``: turn SIGTERM/SIGINT into ``stop()`` while the worker runs
        (see ``worker/signals.py``). ``None``: yes for ``await worker.run()`` (the
        worker is the program), no for ``async with worker:`` (the app around it
        owns its signals and ends the block).

        ``lifespan``: called with the worker, an async context manager opened
        before the first job and closed after the last; what it yields is the
        handlers' ``lifespan_state(...)`` (see ``worker/lifespan.py``)."""
        if lifespan is not None and not callable(lifespan):
            raise TypeError(
                f"lifespan must be a callable returning an async context manager, got {lifespan!r}"
            )
        self.lifespan = lifespan
        self.settings = settings or Settings()
        self.handle_signals = handle_signals
        self.keys = Keys(self.settings.namespace)
        self.registry = JobRegistry(jobs)
        self.registry.add_builtin(FLOW_STEP)  # a flow's next stage may be started by any worker
        self.middleware = list(middleware)
        self.identity = new_identity()
        self.log = logger or log
        self._rng = random.Random()
        self._stopping = anyio.Event()
        self._force = anyio.Event()
        self._started = anyio.Event()
        self._entered = anyio.Event()  # running, or Redis seen away: __aenter__ goes on
        self._stop_requested = False
        self._processors_alive = 0
        self._processors_done = anyio.Event()
        self._reliable = True
        # Cancelled by stop() while start-up waits for Redis (see _start_up).
        self._start_up_scope: anyio.CancelScope | None = None
        self._task_group: TaskGroup | None = None
        self.parts: Parts | None = None  # every part, built once at start-up: see assembly.Parts
        self._lifespan: LifespanRunner[Worker] | None = None  # entered, not yet exited
        self.periodic = startup.periodic_entries(periodic, self.registry.schedules)
        # Set by the CLI, whose process the worker is: the start-up heap is then
        # frozen out of the collector's passes before the first job (heap.py).
        self.freeze_heap = False

    @property
    def started(self) -> anyio.Event:
        """Set once the worker has beaten and its processors fetch."""
        return self._started

    async def __aenter__(self) -> Worker:
        """Start the worker beside the caller; returns once it runs, or at once
        when Redis can't be reached (it keeps trying in the background:
        ``started`` is set when it runs). The block's end stops it gracefully."""
        group = self._task_group = anyio.create_task_group()
        await group.__aenter__()
        group.start_soon(self._run_beside)
        try:
            # A refused connection is seen at once; a link that neither refuses
            # nor answers would take a socket timeout: an app's start-up waits
            # for neither.
            with anyio.move_on_after(ENTER_WAIT):
                await self._entered.wait()
        except BaseException as exc:  # why: always re-raised, after the group is left
            # The run failed before it got going (an error, not an outage), or
            # the caller was cancelled: end the group, raising the run's error.
            await _exit_group(group, exc)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self.stop()
        if self._task_group is None:
            raise RuntimeError("Worker.__aexit__ without __aenter__")
        return await self._task_group.__aexit__(exc_type, exc, tb)

    async def _run_beside(self) -> None:
        await self._run(anyio.TASK_STATUS_IGNORED, signals=self.handle_signals is True)

    # --- the run ---------------------------------------------------------------
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until ``stop()``, SIGTERM/SIGINT or cancellation; returns after the
        shutdown is complete. While Redis can't be reached it waits (logged once
        per outage), and still stops at once when asked."""
        await self._run(task_status, signals=self.handle_signals is not False)

    async def _run(self, task_status: TaskStatus[None], *, signals: bool) -> None:
        if not signals:
            await self._run_once(task_status)
            return
        with stop_on_signals(self.stop, self.log):
            await self._run_once(task_status)

    async def _run_once(self, task_status: TaskStatus[None]) -> None:
        announced = False

        def announce() -> None:
            # The caller of __aenter__ goes on once the worker runs, or once
            # Redis is seen to be away: an app's start-up never waits for Redis.
            nonlocal announced
            if not announced:
                announced = True
                self._entered.set()
                task_status.started()

        settings = self.settings
        redis = connect(settings, max_connections=None)
        blocking = connect(settings, max_connections=2, client_name=wait_name(self.identity))
        lent = set_worker_services((redis, self.keys))  # for a flow's steps
        try:
            for client in (redis, blocking):
                await discovered(client, settings.socket_timeout)
            await self._serve(redis, blocking, announce)
        finally:
            with anyio.CancelScope(shield=True):
                if self.heartbeat is not None:
                    await anyio.to_thread.run_sync(self.heartbeat.close)
                await redis.aclose()
                await blocking.aclose()
            reset_worker_services(lent)
        announce()  # stopped before it ran (an error instead goes to the caller as itself)

    async def _serve(self, redis: Redis, blocking: Redis, announce: Callable[[], None]) -> None:
        settings = self.settings
        try:
            parts = await self._start_up(redis, blocking, announce)
            if parts is None:
                return
            parts.heartbeat.start()
            if not await self._open_lifespan():
                return
            if self.freeze_heap:
                # Here: after every import, the lifespan and the connections.
                freeze_start_up_heap()
            startup.log_started(
                self.log,
                self.identity,
                settings,
                reliable=self._reliable,
                job_types=len(self.registry),
            )
            startup.warn_unread_queues(self.log, settings, self.registry.default_queues)
            limits.set_target(redis, self.keys)  # inherited by every processor task
            async with anyio.create_task_group() as duties:
                duties.start_soon(parts.fetcher.batch_loop)
                duties.start_soon(parts.fetcher.block_loop)
                start_duties(duties, parts)
                async with anyio.create_task_group() as procs:
                    self._processors_alive = settings.concurrency
                    for slot in range(settings.concurrency):
                        procs.start_soon(self._processor, parts.processors, slot)
                    procs.start_soon(self._watch_for_stop, procs, parts)
                    self._started.set()
                    announce()
                # No call out may land after the requeue (or, basic fetch, take its jobs along).
                await parts.fetcher.calls_landed(
                    settings.fetch_idle_max_interval + settings.socket_timeout
                )
                duties.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self._finish(redis)
                    if self.processors is not None:
                        # Best-effort status writes still out land before the
                        # connection closes (bounded: they never hold a stop).
                        await self.processors.drain_tracking()
                finally:
                    # Last: every job is settled and our list requeued by now.
                    if self._lifespan is not None:
                        await self._lifespan.exit()
                        self._lifespan = None

    async def _open_lifespan(self) -> bool:
        """Enter the lifespan, if any, in this task (the processors inherit its state).

        False when ``stop()`` came first; cancellable by ``stop()`` like the rest
        of the start-up (a lifespan waiting for its database never holds a stop).
        """
        if self.lifespan is None:
            return True
        runner = LifespanRunner(self.lifespan, self, self.log)
        with anyio.CancelScope() as self._start_up_scope:
            if not self._stopping.is_set():
                await runner.enter()
                self._lifespan = runner
        self._start_up_scope = None
        return self._lifespan is not None

    async def _start_up(
        self, redis: Redis, blocking: Redis, announce: Callable[[], None]
    ) -> Parts | None:
        """Resolve the fetch mode, build the parts, beat once: the parts, or None when
        ``stop()`` came first.

        Every step may wait for Redis (an outage, or a link that stalls until
        its socket timeout), so the whole start-up is one cancel scope that
        ``stop()`` cancels: a stop, a signal or the end of an ``async with``
        block never waits for Redis to come back.
        """
        settings = self.settings
        if self._stopping.is_set():
            return None
        beaten = False
        with anyio.CancelScope() as self._start_up_scope:
            self._reliable = await startup.resolve_reliable(
                redis, settings, self._stopping, self.log, on_outage=announce
            )
            if not self._stopping.is_set():
                await startup.name_blocking_waits(redis, blocking, self.log)
                parts = self.parts = build_parts(
                    redis,
                    blocking,
                    settings,
                    self.keys,
                    identity=self.identity,
                    registry=self.registry,
                    middleware=self.middleware,
                    logger=self.log,
                    rng=self._rng,
                    reliable=lambda: self._reliable,
                    on_signal=self.remote_signal,
                    periodic=self.periodic,
                )
                # Before the first beat: a wrong-typed heartbeat key would fail it.
                await startup.guard_keys_at_boot(parts.key_guard, settings, self.log)
                beaten = await startup.first_beat(
                    parts.heartbeat, self._stopping, self.log, on_outage=announce
                )
        self._start_up_scope = None
        return self.parts if beaten else None


async def _exit_group(group: TaskGroup, exc: BaseException) -> None:
    """Leave ``group`` after ``exc``; a single error of its task is raised as itself."""
    try:
        await group.__aexit__(type(exc), exc, exc.__traceback__)
    except BaseExceptionGroup as errors:  # always re-raised: unwrapped when it holds one error
        if len(errors.exceptions) == 1:
            raise errors.exceptions[0] from None
        raise
