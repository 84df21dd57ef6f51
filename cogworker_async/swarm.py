"""``--processes N``: N worker processes under one supervisor.

Each child is a fresh ``cogworker-async worker`` process, so it has its own
identity and fresh error/lock state. A child that dies is replaced (with a
growing delay if it keeps dying quickly) and its exit status is logged; a
child past the optional memory limit is asked to stop gracefully and then
replaced. SIGTERM/SIGINT are passed to every child, which shut down
gracefully; the supervisor exits 0 once all have.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

log = logging.getLogger("cogworker_async.swarm")

QUICK_DEATH = 10.0
MAX_RESTART_DELAY = 30.0
POLL = 0.2
# A child just started is still importing and can't yet stop gracefully (its
# SIGTERM handler is not installed): its memory is judged once it has said, on
# a pipe, that it handles SIGTERM (worker/signals.py), and has run a moment.
MEMORY_GRACE = 2.0
# A child that never says so (an older version, a broken pipe) is judged anyway
# after this long.
READY_WAIT = 120.0
READY_FD_ENV = "COGWORKER_READY_FD"  # as worker/signals.py reads it
# Our pid, by which a child sees that its supervisor is gone (worker/signals.py).
SUPERVISOR_PID_ENV = "COGWORKER_SUPERVISOR_PID"


def rss_mb(pid: int) -> float | None:
    """Resident memory of ``pid`` in MiB (Linux /proc), None when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class Child:
    process: subprocess.Popen[bytes]
    started: float
    delay: float = 0.0
    retiring: bool = False
    # Our end of the pipe the child says "ready" on; None once heard (or closed).
    ready_fd: int | None = None

    def handles_stop(self) -> bool:
        """Whether the child has said that SIGTERM stops it gracefully (non-blocking)."""
        if self.ready_fd is None:
            return True
        try:
            said = os.read(self.ready_fd, 1)
        except BlockingIOError:
            return False
        except OSError:
            said = b""
        # b"" (closed without a word: it exited, or never says): judged as the others.
        del said
        self.close_pipe()
        return True

    def close_pipe(self) -> None:
        if self.ready_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.ready_fd)
            self.ready_fd = None


class Swarm:
    def __init__(self, count: int, argv: list[str], *, max_rss_mb: float | None = None) -> None:
        self.count = count
        # Our own interpreter and our own arguments: nothing untrusted runs here.
        self.command = [sys.executable, "-m", "cogworker_async", *argv]
        self.max_rss_mb = max_rss_mb
        self.children: dict[int, Child] = {}
        self.signals = 0

    def spawn(self, slot: int, delay: float = 0.0) -> None:
        ours, theirs = os.pipe()
        os.set_blocking(ours, False)
        env = {**os.environ, READY_FD_ENV: str(theirs), SUPERVISOR_PID_ENV: str(os.getpid())}
        try:
            process = subprocess.Popen(self.command, env=env, pass_fds=(theirs,))  # noqa: S603
        finally:
            os.close(theirs)
        old = self.children.get(slot)
        if old is not None:
            old.close_pipe()
        self.children[slot] = Child(process, time.monotonic(), delay, ready_fd=ours)
        log.info("swarm: child %d started (pid %d)", slot, process.pid)

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signals += 1
        for child in self.children.values():
            if child.process.poll() is None:
                child.process.send_signal(signum)

    def check_children(self) -> None:
        for slot, child in list(self.children.items()):
            code = child.process.poll()
            if code is None:
                self._check_memory(slot, child)
                continue
            if self.signals:
                continue
            lived = time.monotonic() - child.started
            quick = lived < QUICK_DEATH and not child.retiring
            delay = min(MAX_RESTART_DELAY, max(1.0, child.delay * 2)) if quick else 0.0
            log.warning(
                "swarm: child %d (pid %d) exited with status %s after %.1f s; "
                "replacing it in %.1f s",
                slot,
                child.process.pid,
                code,
                lived,
                delay,
            )
            time.sleep(delay)
            if not self.signals:
                self.spawn(slot, delay)

    def _check_memory(self, slot: int, child: Child) -> None:
        if self.max_rss_mb is None or child.retiring:
            return
        if time.monotonic() - child.started < MEMORY_GRACE:
            return
        if not child.handles_stop() and time.monotonic() - child.started < READY_WAIT:
            return
        used = rss_mb(child.process.pid)
        if used is not None and used > self.max_rss_mb:
            log.warning(
                "swarm: child %d (pid %d) uses %.0f MiB, over the %.0f MiB limit: "
                "stopping it gracefully to replace it",
                slot,
                child.process.pid,
                used,
                self.max_rss_mb,
            )
            child.retiring = True
            child.process.send_signal(signal.SIGTERM)

    def wait_all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for child in self.children.values():
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("swarm: child pid %d did not stop in time: killing it", child.process.pid)
                child.process.kill()
                child.process.wait()


def run_swarm(
    count: int, argv: list[str], shutdown_timeout: float, *, max_rss_mb: float | None = None
) -> int:
    """Supervise ``count`` children running ``cogworker-async <argv>``; returns the exit code."""
    swarm = Swarm(count, argv, max_rss_mb=max_rss_mb)
    signal.signal(signal.SIGTERM, swarm.on_signal)
    signal.signal(signal.SIGINT, swarm.on_signal)
    for slot in range(count):
        swarm.spawn(slot)
    while not swarm.signals:
        time.sleep(POLL)
        swarm.check_children()
    swarm.wait_all(shutdown_timeout + 10)
    return 0
