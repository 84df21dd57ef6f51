"""The job handlers the benchmarks run.

Names are fixed (``bench.*``) so the payloads match whether this module is
imported as ``jobs`` (scripts run from ``bench/``) or under another path.

Each handler marks the first moment a job starts in this process
(``WINDOW``): the worker runner measures wall and CPU time from there, so
process start-up and connecting are not charged to the jobs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from cogworker_async import current_job, job


class Window:
    """Wall clock and process CPU time when the first job of this process started."""

    __slots__ = ("calls", "cpu", "wall")

    def __init__(self) -> None:
        self.wall: float | None = None
        self.cpu: float | None = None
        self.calls = 0  # handler calls in this process: a check that the jobs really ran

    def mark(self) -> None:
        if self.wall is None:
            self.wall = time.perf_counter()
            self.cpu = time.process_time()


WINDOW = Window()


class LatencySink:
    """Where ``latency`` appends its measurement: a Redis client and a list key."""

    __slots__ = ("key", "redis")

    def __init__(self) -> None:
        self.redis: Any = None
        self.key: str | None = None


SINK = LatencySink()


def configure_sink(redis: Any, key: str) -> None:
    """Called by the worker runner before the worker starts (latency runs only)."""
    SINK.redis = redis
    SINK.key = key


@job(name="bench.noop")
async def noop(i: int) -> None:
    """Nothing at all: what is measured is the queue's own cost per job."""
    if WINDOW.wall is None:
        WINDOW.mark()
    WINDOW.calls += 1


@job(name="bench.sleep")
async def sleep(i: int, seconds: float = 0.01) -> None:
    """Waits like an I/O call would; many of these overlap under concurrency."""
    if WINDOW.wall is None:
        WINDOW.mark()
    WINDOW.calls += 1
    await asyncio.sleep(seconds)


@job(name="bench.latency")
async def latency(i: int) -> None:
    """Appends (start - created_at) in seconds to the sink list."""
    started = time.time()
    if WINDOW.wall is None:
        WINDOW.mark()
    WINDOW.calls += 1
    created_at = float(current_job().payload["created_at"])
    if SINK.redis is None or SINK.key is None:
        raise RuntimeError("latency sink not configured (run through bench/_worker_proc.py)")
    await SINK.redis.rpush(SINK.key, repr(started - created_at))


ALL = [noop, sleep, latency]
