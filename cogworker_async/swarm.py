"""``--processes N``: N worker processes under one supervisor.

Each child is a fresh ``cogworker-async worker`` process, so it has its own
identity and fresh state. A child that dies is replaced (with a growing delay
if it keeps dying quickly); SIGTERM/SIGINT are passed to every child, which
then shut down gracefully, and the supervisor exits 0 once all have.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from types import FrameType

log = logging.getLogger("cogworker_async.swarm")

QUICK_DEATH = 10.0
MAX_RESTART_DELAY = 30.0


def run_swarm(count: int, argv: list[str], shutdown_timeout: float) -> int:
    """Supervise ``count`` children running ``cogworker-async <argv>``; returns the exit code."""
    command = [sys.executable, "-m", "cogworker_async", *argv]
    children: dict[int, tuple[subprocess.Popen[bytes], float]] = {}
    delays = dict.fromkeys(range(count), 0.0)
    stopping = {"signals": 0}

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping["signals"] += 1
        for child, _ in children.values():
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def spawn(slot: int) -> None:
        # Our own interpreter and our own arguments: nothing untrusted runs here.
        children[slot] = (subprocess.Popen(command), time.monotonic())  # noqa: S603
        log.info("swarm: child %d started (pid %d)", slot, children[slot][0].pid)

    for slot in range(count):
        spawn(slot)
    while not stopping["signals"]:
        time.sleep(0.2)
        for slot, (child, started) in list(children.items()):
            code = child.poll()
            if code is None or stopping["signals"]:
                continue
            lived = time.monotonic() - started
            delays[slot] = (
                min(MAX_RESTART_DELAY, max(1.0, delays[slot] * 2)) if lived < QUICK_DEATH else 0.0
            )
            log.warning(
                "swarm: child %d (pid %d) exited with %s after %.1f s; replacing it in %.1f s",
                slot,
                child.pid,
                code,
                lived,
                delays[slot],
            )
            time.sleep(delays[slot])
            if not stopping["signals"]:
                spawn(slot)
    deadline = time.monotonic() + shutdown_timeout + 10
    for child, _ in children.values():
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.error("swarm: child pid %d did not stop in time: killing it", child.pid)
            child.kill()
    return 0
