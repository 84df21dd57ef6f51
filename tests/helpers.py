"""Waiting on conditions instead of sleeping."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Awaitable, Callable

import anyio


async def wait_for(
    condition: Callable[[], Awaitable[bool]], timeout: float = 10.0, interval: float = 0.02
) -> None:
    """Poll ``condition`` until true; fail the test with a clear message after ``timeout``."""
    with anyio.fail_after(timeout):
        while not await condition():
            await anyio.sleep(interval)


def wait_for_sync(
    condition: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def stop_processes(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each (a graceful stop), wait up to 20 s, then SIGKILL what is left."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
