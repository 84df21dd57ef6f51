"""SIGTERM/SIGINT as a graceful stop, for ``Worker.run()`` and the CLI alike.

A worker that runs as the program (``cogworker-async worker``, or a user's own
``asyncio.run(main())`` around ``await worker.run()``) must turn SIGTERM and
SIGINT into ``worker.stop()``: without a handler SIGTERM kills the process at
once (no requeue, no deregistration, no ``finally``), and ``asyncio.run``'s
own SIGINT handler cancels the main task, and with it every running job,
instead of giving them ``shutdown_timeout``. A second signal calls ``stop()``
again, which skips the wait for running jobs (they are still requeued).

Handlers go on the running loop (``loop.add_signal_handler``), so they run as
ordinary callbacks, never in the middle of a Redis call. That is only
possible from the main thread of a Unix asyncio loop; anywhere else nothing is
installed and the caller's own arrangements stand. Whatever was installed
before is put back when the block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# Set by a supervisor (``--processes``): the pipe on which a child says that a
# SIGTERM now stops it gracefully. Before that, SIGTERM would kill it outright.
READY_FD_ENV = "COGWORKER_READY_FD"
# Also set by the supervisor: its pid. A child whose parent is no longer that
# process (the supervisor was SIGKILLed, or crashed) stops gracefully instead
# of running on unsupervised: nothing would restart it, bound its memory or
# pass it a stop signal any more.
SUPERVISOR_PID_ENV = "COGWORKER_SUPERVISOR_PID"
PARENT_CHECK_INTERVAL = 1.0  # s between looks at os.getppid(): one cheap syscall


@contextmanager
def stop_on_signals(stop: Callable[[], None], logger: logging.Logger) -> Iterator[bool]:
    """Call ``stop`` on each SIGTERM/SIGINT while the block runs; yields whether installed."""
    loop = _main_thread_loop()
    saved: list[tuple[signal.Signals, Any, Any]] = []
    if loop is not None:

        def received(sig: signal.Signals) -> None:
            logger.warning(
                "received %s: stopping gracefully (send it again to stop faster)", sig.name
            )
            stop()

        for sig in STOP_SIGNALS:
            before = signal.getsignal(sig)
            # A handler someone added to this loop earlier lives in the loop, not
            # in the signal module: asyncio keeps it in a private table.
            loop_handler = getattr(loop, "_signal_handlers", {}).get(sig)
            try:
                loop.add_signal_handler(sig, received, sig)
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # not a Unix loop, or not allowed here: leave it as it was
            saved.append((sig, before, loop_handler))
    if saved:
        tell_supervisor_ready()
    watch = _watch_supervisor(loop, stop, logger) if loop is not None else None
    try:
        yield bool(saved)
    finally:
        if watch is not None:
            watch.cancel()
        assert loop is not None or not saved
        for sig, before, loop_handler in reversed(saved):
            _restore(loop, sig, before, loop_handler)


def _main_thread_loop() -> asyncio.AbstractEventLoop | None:
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # not under asyncio (say, anyio on trio)
        return None


def _restore(loop: Any, sig: signal.Signals, before: Any, loop_handler: Any) -> None:
    try:
        loop.remove_signal_handler(sig)
        if loop_handler is not None:
            loop.add_signal_handler(sig, loop_handler._callback, *loop_handler._args)
        elif before is not None:
            # asyncio.run's SIGINT handler, a handler set with signal.signal, or the default.
            signal.signal(sig, before)
    except (RuntimeError, ValueError, OSError):
        pass  # the loop is closing or the signal can't be set here: nothing to put back


class _SupervisorWatch:
    """Calls ``stop`` once when this process's parent is no longer its supervisor."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        supervisor: int,
        stop: Callable[[], None],
        logger: logging.Logger,
    ) -> None:
        self._loop = loop
        self._supervisor = supervisor
        self._stop = stop
        self._log = logger
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._handle = self._loop.call_later(PARENT_CHECK_INTERVAL, self._look)

    def _look(self) -> None:
        if os.getppid() == self._supervisor:
            self.start()
            return
        self._handle = None
        self._log.error(
            "the supervisor (pid %d) is gone: stopping gracefully, as at SIGTERM",
            self._supervisor,
        )
        self._stop()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


@functools.cache
def _supervisor_pid() -> int | None:
    """The supervisor's pid, read once per process (every stop_on_signals block of
    it, the CLI's wait for Redis and its run, watches the same parent), and taken
    out of the environment so that processes a job starts do not inherit it."""
    named = os.environ.pop(SUPERVISOR_PID_ENV, "")
    return int(named) if named.isdigit() else None


def _watch_supervisor(
    loop: asyncio.AbstractEventLoop, stop: Callable[[], None], logger: logging.Logger
) -> _SupervisorWatch | None:
    """Under a supervisor (``--processes``): a look at the parent every second."""
    supervisor = _supervisor_pid()
    if supervisor is None:
        return None
    watch = _SupervisorWatch(loop, supervisor, stop, logger)
    watch.start()
    return watch


def tell_supervisor_ready() -> None:
    """Tell the supervisor that started this process (if any) that its stop signals
    are handled now: one byte on the pipe it named, once per process."""
    fd = os.environ.pop(READY_FD_ENV, None)
    if fd is None or not fd.isdigit():
        return
    with contextlib.suppress(OSError):
        os.write(int(fd), b"1")
    with contextlib.suppress(OSError):
        os.close(int(fd))
