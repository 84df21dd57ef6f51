"""Sync handlers in threads: a plain ``def`` runs off the loop, and is never abandoned.

A thread can't be stopped. So a sync job past its timeout keeps its slot until
the thread returns and is filed then (as timed out): filed earlier, its retry
could start while it still runs. At the end of ``shutdown_timeout`` the
shutdown waits for such threads (``hold``; the heartbeat still beats) and
settles them as they return; a second stop (``release``), or a cancellation
from outside, leaves them running: their jobs stay on this process's list
(``left_running``: kept, not requeued), for orphan recovery once the process
is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import threading
from collections.abc import Callable
from typing import Any

import anyio

from cogworker_async.errors import JobTimeout


class HandlerThread:
    """A sync handler's call, made in its thread: how it ended, and (if asked) when.

    It catches everything the handler raises (``SystemExit`` included) so the
    processor re-raises it on the loop as the job's own failure. Only a
    processor that waits for it past a cancellation (``watch``) is told on the
    loop when it returns: a plain sync job costs no second loop wake-up.
    """

    __slots__ = ("call", "done", "error", "left", "lock", "loop", "overran", "state", "watched")

    def __init__(self, call: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> None:
        self.call = call
        self.loop = loop
        self.error: BaseException | None = None
        self.overran = False
        self.lock = threading.Lock()
        # waiting -> started -> returned (in its thread), or waiting -> called off (never runs)
        self.state = "waiting"
        self.watched = False
        self.done: asyncio.Event | None = None
        self.left: Callable[[], None] | None = None  # set when the processor stopped waiting

    @property
    def returned(self) -> bool:
        return self.state == "returned"

    def started(self) -> bool:
        """On the loop, once cancelled: has the call started? If not, it never will."""
        with self.lock:
            if self.state == "waiting":
                self.state = "called off"
            return self.state != "called off"

    def watch(self) -> asyncio.Event | None:
        """On the loop: an event set when the call returns; None if it already has."""
        with self.lock:
            if self.state == "returned":
                return None
            self.watched = True
            self.done = asyncio.Event()
            return self.done

    def __call__(self) -> None:
        with self.lock:
            if self.state == "called off":
                return
            self.state = "started"
        try:
            self.call()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the loop as the job's failure
            self.error = exc
        finally:
            with self.lock:
                self.state = "returned"
                watched = self.watched
            if watched:
                # A closed loop (the worker is gone) has nobody waiting for it.
                with contextlib.suppress(RuntimeError):
                    self.loop.call_soon_threadsafe(self._returned)

    def _returned(self) -> None:
        if self.done is not None:
            self.done.set()
        if self.left is not None:
            self.left()


def cancelled_by_us(exc: BaseException) -> bool:
    """Is this the cancellation of one of our scopes, not one the handler raised itself?

    anyio reports a cancelled enclosing scope as a deadline of -inf; a plain
    ``task.cancel()`` (``asyncio.timeout``, a user cancelling the task running
    ``run()``) is counted by ``Task.cancelling()``.
    """
    if not isinstance(exc, asyncio.CancelledError):
        return False
    if anyio.current_effective_deadline() == -math.inf:
        return True
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class HandlerThreads:
    """The threads a worker's processors run sync handlers in, and the shutdown's hold on them."""

    def __init__(self, *, concurrency: int, logger: logging.Logger) -> None:
        self._log = logger
        self.limiter = anyio.CapacityLimiter(concurrency)
        # Shutdown: wait for handler threads still running once our processors
        # are cancelled (hold), until a second stop (release).
        self._hold = False
        self._held: set[HandlerThread] = set()
        # Jobs whose thread was left running: kept on the list by the shutdown.
        self.left_running: list[bytes] = []

    def hold(self) -> None:
        """Our processors are about to be cancelled: wait for the threads they run."""
        self._hold = True

    def release(self) -> None:
        """A second stop: stop waiting for threads; their jobs stay on the list."""
        self._hold = False
        for thread in list(self._held):
            if thread.done is not None:
                thread.done.set()

    async def run(
        self, raw: bytes, job: dict[str, Any], call: Callable[[], Any], limit: float | None
    ) -> None:
        """A plain def in a thread (it can't stall the loop), never abandoned on a timeout.

        Past its timeout the thread goes on (Python can't kill it) and so does
        its slot: the job is filed as timed out once the thread returns, so
        its retry can never start while it still runs.
        """
        loop = asyncio.get_running_loop()
        thread = HandlerThread(call, loop)
        timer = None
        if limit is not None:
            timer = loop.call_later(limit, self._overran, thread, job, limit)
        try:
            await anyio.to_thread.run_sync(thread, abandon_on_cancel=True, limiter=self.limiter)
        except BaseException as exc:  # why: ours re-raised unless outlasted
            if not cancelled_by_us(exc) or not thread.started():
                raise  # it never ran: the shutdown requeues it
            # It ran, or runs on: settle it once it has returned, unless we leave it.
            if not await self._outlast(raw, job, thread):
                raise
        finally:
            if timer is not None:
                timer.cancel()
        if thread.overran:
            raise JobTimeout(f"ran past its timeout of {limit} s") from thread.error
        if thread.error is not None:
            raise thread.error

    def _overran(self, thread: HandlerThread, job: dict[str, Any], limit: float) -> None:
        if thread.returned:
            return  # it returned in time; its processor has not resumed yet
        thread.overran = True
        self._log.warning(
            "jid=%s %s is still running after its timeout of %s s: a thread can't be stopped, "
            "so its slot stays taken and it is filed as timed out once it returns",
            job["jid"],
            job["class"],
            limit,
        )

    async def _outlast(self, raw: bytes, job: dict[str, Any], thread: HandlerThread) -> bool:
        """We are cancelled while the job's thread still runs: wait for it, or leave it.

        Waits (shielded) when the shutdown holds threads, until the thread
        returns or a second stop; True if it returned. A job left running is
        not requeued by the shutdown (it would run twice at once): it stays on
        the list, for orphan recovery once this process is gone.
        """
        done = thread.watch()
        if done is None:
            return True  # it has just returned
        if self._hold:
            self._log.warning(
                "jid=%s %s still runs in its thread at the end of shutdown_timeout: a thread "
                "can't be stopped, waiting for it (stop again to leave it running)",
                job["jid"],
                job["class"],
            )
            self._held.add(thread)
            try:
                with anyio.CancelScope(shield=True):
                    await done.wait()
            finally:
                self._held.discard(thread)
            if thread.returned:
                return True
        self._log.warning(
            "jid=%s %s left running in its thread (a thread can't be stopped): it stays on "
            "this process's list, not requeued, for orphan recovery once this process is gone",
            job["jid"],
            job["class"],
        )
        self.left_running.append(raw)
        thread.left = functools.partial(self._thread_returned, raw)
        return False

    def _thread_returned(self, raw: bytes) -> None:
        if raw in self.left_running:
            self.left_running.remove(raw)
