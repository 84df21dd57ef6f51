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
    try:
        yield bool(saved)
    finally:
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
