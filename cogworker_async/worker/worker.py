"""``Worker``: the lifecycle of one worker process (or one embedded worker).

Order of life: resolve the fetch mode, beat once, then start the duties and
the processors. On stop: no more fetching; running jobs get
``shutdown_timeout``; then they are cancelled (not a failure) and this
process's own in-progress list is requeued at once, shielded, except jobs
that finished but whose ack is still pending (dropped: that is their ack),
failures that could not be filed and jobs whose thread was left running
(both kept on the list for recovery). A plain ``def`` still in its thread
when the wait ends is waited for (a thread can't be cancelled) until it
returns or a second ``stop()``. Only then do
the heartbeat keys go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from cogworker_async.jobs import JobRegistry, JobSpec
from cogworker_async.keys import Keys
from cogworker_async.middleware import ServerMiddleware
from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect
from cogworker_async.worker.duties import start_duties
from cogworker_async.worker.fetcher import Fetcher
from cogworker_async.worker.heartbeat import Heartbeat
from cogworker_async.worker.keyguard import KeyGuard
from cogworker_async.worker.processor import Processors
from cogworker_async.worker.reconcile import Reconciler
from cogworker_async.worker.recovery import Recovery
from cogworker_async.worker.settlement import Settler
from cogworker_async.worker.shutdown import finish
from cogworker_async.worker.startup import first_beat, guard_keys_at_boot, resolve_reliable

log = logging.getLogger("cogworker_async.worker")


def new_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


class Worker:
    """Runs jobs from Redis. ``await worker.run()``, or ``async with worker:`` beside an app."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        jobs: Iterable[JobSpec] = (),
        middleware: Sequence[ServerMiddleware] = (),
        logger: logging.Logger | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.keys = Keys(self.settings.namespace)
        self.registry = JobRegistry(jobs)
        self.middleware = list(middleware)
        self.identity = new_identity()
        self.log = logger or log
        self._rng = random.Random()
        self._stopping = anyio.Event()
        self._force = anyio.Event()
        self._started = anyio.Event()
        self._stop_requested = False
        self._processors_alive = 0
        self._processors_done = anyio.Event()
        self._reliable = True
        self._task_group: TaskGroup | None = None
        self.processors: Processors | None = None
        self.fetcher: Fetcher | None = None
        self.settler: Settler | None = None
        self.heartbeat: Heartbeat | None = None
        self.recovery: Recovery | None = None
        self.reconciler: Reconciler | None = None
        self.key_guard: KeyGuard | None = None

    # --- control -----------------------------------------------------------
    def stop(self) -> None:
        """Ask for a graceful stop; a second call skips the wait for running jobs."""
        if self._stop_requested:
            self._force.set()
            if self.processors is not None:
                self.processors.release_threads()
        self._stop_requested = True
        self._stopping.set()

    @property
    def started(self) -> anyio.Event:
        """Set once the worker has beaten and its processors fetch."""
        return self._started

    async def __aenter__(self) -> Worker:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        await self._task_group.start(self._run_started)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self.stop()
        assert self._task_group is not None
        return await self._task_group.__aexit__(exc_type, exc, tb)

    async def _run_started(self, *, task_status: TaskStatus[None]) -> None:
        await self.run(task_status=task_status)

    # --- the run ---------------------------------------------------------------
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until ``stop()`` or cancellation; returns after the shutdown is complete."""
        settings = self.settings
        redis = connect(settings, max_connections=None)
        blocking = connect(settings, max_connections=2)
        try:
            self._reliable = await resolve_reliable(redis, settings, self._stopping, self.log)
            if self._stopping.is_set():
                task_status.started()
                return
            # First: every part that may meet a WRONGTYPE reply wakes it.
            self.key_guard = KeyGuard(
                redis,
                self.keys,
                settings,
                identity=self.identity,
                queues=[s.name for s in settings.queue_specs],
                logger=self.log,
            )
            self.settler = Settler(
                redis,
                self.keys,
                settings,
                identity=self.identity,
                logger=self.log,
                rng=self._rng,
                on_wrong_type=self.key_guard.request_check,
            )
            self.fetcher = Fetcher(
                redis,
                blocking,
                self.keys,
                identity=self.identity,
                queues=settings.queue_specs,
                strict_order=settings.strict_order,
                reliable=self._reliable,
                idle_max=settings.fetch_idle_max_interval,
                logger=self.log,
                rng=self._rng,
                on_missing_ack=lambda ack: self.settler.note_duplicate(ack.jid),  # type: ignore[union-attr]
                prefetch=settings.effective_prefetch,
                on_wrong_type=self.key_guard.request_check,
            )
            self.processors = Processors(
                self.fetcher,
                self.settler,
                self.registry,
                self.middleware,
                default_timeout=settings.job_timeout,
                concurrency=settings.concurrency,
                logger=self.log,
            )
            # What the fetcher may forget the source queue of: none of these.
            self.fetcher.ours = self._known_jobs
            self.heartbeat = Heartbeat(
                settings,
                self.keys,
                identity=self.identity,
                queues=[s.name for s in settings.queue_specs],
                reliable=lambda: self._reliable,
                busy=self.processors.snapshot,
                logger=self.log,
                on_signal=self._signal_from_thread(),
                on_wrong_type=self._wrong_type_from_thread(),
            )
            # Before the first beat: a wrong-typed heartbeat key would fail it.
            await guard_keys_at_boot(self.key_guard, settings, self.log)
            await first_beat(self.heartbeat, self.log)
            self.heartbeat.start()
            self.log.info(
                "worker %s started: %d processors, queues %s, %s fetch, %d job types",
                self.identity,
                settings.concurrency,
                ",".join(settings.queues),
                "reliable" if self._reliable else "basic",
                len(self.registry),
            )
            try:
                async with anyio.create_task_group() as duties:
                    duties.start_soon(self.fetcher.batch_loop)
                    duties.start_soon(self.fetcher.block_loop)
                    self._start_duties(duties, redis)
                    async with anyio.create_task_group() as procs:
                        self._processors_alive = settings.concurrency
                        for slot in range(settings.concurrency):
                            procs.start_soon(self._processor, slot)
                        procs.start_soon(self._watch_for_stop, procs)
                        self._started.set()
                        task_status.started()
                    duties.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    await self._finish(redis)
        finally:
            with anyio.CancelScope(shield=True):
                if self.heartbeat is not None:
                    await anyio.to_thread.run_sync(self.heartbeat.close)
                await redis.aclose()
                await blocking.aclose()
            task_status.started() if not self._started.is_set() else None

    def _start_duties(self, duties: TaskGroup, redis: Any) -> None:
        settings = self.settings
        assert self.settler is not None
        assert self.fetcher is not None
        assert self.key_guard is not None
        self.recovery = Recovery(
            redis, self.keys, settings, identity=self.identity, logger=self.log
        )
        self.reconciler = Reconciler(
            redis,
            self.keys,
            self.settler,
            identity=self.identity,
            default_queue=settings.queue_specs[0].name,
            known=self._known_jobs,
            fetching_since=self.fetcher.fetching_since,
            reliable=lambda: self._reliable,
            logger=self.log,
        )
        start_duties(
            duties,
            redis=redis,
            keys=self.keys,
            settings=settings,
            rng=self._rng,
            logger=self.log,
            recovery=self.recovery if self._reliable else None,
            reconciler=self.reconciler,
            key_guard=self.key_guard,
        )

    def _known_jobs(self) -> list[bytes]:
        """Every in-progress job this process holds in memory (see Reconciler)."""
        assert self.processors is not None
        assert self.fetcher is not None
        assert self.settler is not None
        known = list(self.processors.claimed.values())
        known.extend(self.fetcher.held)
        known.extend(self.fetcher.pending_ack_raws())
        known.extend(self.settler.pending)
        return known

    def _signal_from_thread(self) -> Callable[[str], None]:
        """A callback for the heartbeat thread that acts on the event loop."""
        loop = asyncio.get_running_loop()

        def deliver(name: str) -> None:
            loop.call_soon_threadsafe(self.remote_signal, name)

        return deliver

    def _wrong_type_from_thread(self) -> Callable[[], None]:
        """The heartbeat thread's WRONGTYPE: wake the key guard, on the event loop."""
        loop = asyncio.get_running_loop()

        def deliver() -> None:
            if self.key_guard is None:
                return
            # A closed loop: the worker is gone, nothing left to guard.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.key_guard.request_check)

        return deliver

    def remote_signal(self, name: str) -> None:
        """``quiet``: stop fetching, finish what runs; ``stop``: shut down gracefully."""
        if name == "quiet":
            self.quiet()
        elif name == "stop":
            self.stop()
        else:
            self.log.error("unknown remote signal %r ignored (expected quiet or stop)", name)

    def quiet(self) -> None:
        """Stop fetching new jobs; running ones finish. The process stays until ``stop()``."""
        if self.fetcher is not None:
            self.fetcher.close()
        if self.heartbeat is not None:
            self.heartbeat.quiet = True
        self.log.warning("worker %s is quiet: no more fetching", self.identity)

    async def _watch_for_stop(self, procs: TaskGroup) -> None:
        await self._stopping.wait()
        assert self.fetcher is not None
        assert self.processors is not None
        self.fetcher.close()
        self.log.info(
            "worker %s stopping: waiting up to %.1f s for %d running job(s)",
            self.identity,
            self.settings.shutdown_timeout,
            len(self.processors.running),
        )
        with anyio.move_on_after(self.settings.shutdown_timeout):
            async with anyio.create_task_group() as waiters:
                waiters.start_soon(self._wait_idle, waiters)
                waiters.start_soon(self._wait_forced, waiters)
        if self.processors.running:
            self.log.warning(
                "cancelling %d job(s) still running; they go back on their queues",
                len(self.processors.running),
            )
        if not self._force.is_set():
            self.processors.hold_threads()  # a thread can't be cancelled: wait for it
        procs.cancel_scope.cancel()

    async def _wait_idle(self, group: TaskGroup) -> None:
        await self._processors_done.wait()
        group.cancel_scope.cancel()

    async def _processor(self, slot: int) -> None:
        assert self.processors is not None
        try:
            await self.processors.run(slot)
        finally:
            self._processors_alive -= 1
            if self._processors_alive == 0:
                self._processors_done.set()

    async def _wait_forced(self, group: TaskGroup) -> None:
        await self._force.wait()
        group.cancel_scope.cancel()

    async def _finish(self, redis: Any) -> None:
        if self.fetcher is None or self.heartbeat is None or self.settler is None:
            return
        assert self.processors is not None
        await finish(
            redis,
            self.keys,
            self.settings,
            identity=self.identity,
            reliable=self._reliable,
            fetcher=self.fetcher,
            settler=self.settler,
            heartbeat=self.heartbeat,
            logger=self.log,
            still_running=list(self.processors.left_running),
        )
