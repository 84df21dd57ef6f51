"""A worker's control and its stop: ``stop()``, ``quiet()``, the remote signals,
the wait for running jobs at a stop, and the shutdown's finish (the requeue,
see ``shutdown.py``).

A mixin of ``Worker`` (its state is set by ``Worker.__init__``).
"""

from __future__ import annotations

import logging

import anyio
from anyio.abc import TaskGroup
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.worker.assembly import Parts
from cogworker_async.worker.parts_view import PartsView
from cogworker_async.worker.processor import Processors
from cogworker_async.worker.shutdown import finish


class WorkerStop(PartsView):
    """The worker's control and stop (state set by ``Worker``)."""

    settings: Settings
    keys: Keys
    identity: str
    log: logging.Logger
    _stopping: anyio.Event
    _force: anyio.Event
    _stop_requested: bool
    _start_up_scope: anyio.CancelScope | None
    _processors_alive: int
    _processors_done: anyio.Event
    _reliable: bool

    def stop(self) -> None:
        """Ask for a graceful stop; a second call skips the wait for running jobs."""
        if self._stop_requested:
            self._force.set()
            if self.processors is not None:
                self.processors.release_threads()
        self._stop_requested = True
        self._stopping.set()
        if self._start_up_scope is not None:
            self._start_up_scope.cancel()

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

    async def _watch_for_stop(self, procs: TaskGroup, parts: Parts) -> None:
        await self._stopping.wait()
        parts.fetcher.close()
        self.log.info(
            "worker %s stopping: waiting up to %.1f s for %d running job(s)",
            self.identity,
            self.settings.shutdown_timeout,
            len(parts.processors.running),
        )
        with anyio.move_on_after(self.settings.shutdown_timeout):
            async with anyio.create_task_group() as waiters:
                waiters.start_soon(self._wait_idle, waiters)
                waiters.start_soon(self._wait_forced, waiters)
        if parts.processors.running:
            self.log.warning(
                "cancelling %d job(s) still running; they go back on their queues",
                len(parts.processors.running),
            )
        if not self._force.is_set():
            parts.processors.hold_threads()  # a thread can't be cancelled: wait for it
        procs.cancel_scope.cancel()

    async def _wait_idle(self, group: TaskGroup) -> None:
        await self._processors_done.wait()
        group.cancel_scope.cancel()

    async def _processor(self, processors: Processors, slot: int) -> None:
        try:
            await processors.run(slot)
        finally:
            self._processors_alive -= 1
            if self._processors_alive == 0:
                self._processors_done.set()

    async def _wait_forced(self, group: TaskGroup) -> None:
        await self._force.wait()
        group.cancel_scope.cancel()

    async def _finish(self, redis: Redis) -> None:
        parts = self.parts
        if parts is None:
            return  # never built: nothing of this process is on Redis
        if parts.heartbeat.last_stamp is None:
            return  # never beaten: nothing of this process is on Redis to requeue or remove
        await finish(
            redis,
            self.keys,
            self.settings,
            identity=self.identity,
            reliable=self._reliable,
            fetcher=parts.fetcher,
            settler=parts.settler,
            heartbeat=parts.heartbeat,
            logger=self.log,
            still_running=list(parts.processors.left_running),
            releases=parts.releases,
            interrupted=list(parts.processors.interrupted),
        )
        # Last: a discard dropped by the shutdown defers its release too.
        with anyio.move_on_after(self.settings.socket_timeout):
            await parts.releases.close()
