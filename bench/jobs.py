"""The job handlers the benchmarks run.

Names are fixed (``bench.*``) so the payloads match whether this module is
imported as ``jobs`` (scripts run from ``bench/``) or under another path.

Each handler marks the first moment a job starts in this process
(``WINDOW``): the worker runner measures wall and CPU time from there, so
process start-up and connecting are not charged to the jobs.
"""

from __future__ import annotations

import asyncio
import os
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


@job(name="bench.delayed")
async def delayed(i: int, due: float) -> None:
    """Appends (start - due) in seconds to the sink list: how late a delayed job ran."""
    started = time.time()
    if WINDOW.wall is None:
        WINDOW.mark()
    WINDOW.calls += 1
    if SINK.redis is None or SINK.key is None:
        raise RuntimeError("latency sink not configured (run through bench/_worker_proc.py)")
    await SINK.redis.rpush(SINK.key, repr(started - due))


class RecordFile:
    """Where ``record`` writes: the file named by ``RECORD_ENV``, opened on first use."""

    __slots__ = ("fd",)

    def __init__(self) -> None:
        self.fd: int | None = None

    def open(self) -> int:
        path = os.environ.get(RECORD_ENV)
        if not path:
            raise RuntimeError(f"{RECORD_ENV} is not set (run through bench/kill_duplicates.py)")
        self.fd = os.open(path, os.O_APPEND | os.O_WRONLY | os.O_CREAT, 0o644)
        return self.fd


RECORD_ENV = "COGBENCH_RECORD_FILE"
RECORD = RecordFile()


@job(name="bench.record")
async def record(i: int) -> None:
    """Appends ``i`` and a newline to the record file: one unbuffered ``write(2)``.

    O_APPEND and no user-space buffer: once the call returns, the line is the
    kernel's and survives a SIGKILL of this process the next instant, so the
    file counts every run, including those whose ack never reached Redis.
    """
    fd = RECORD.fd if RECORD.fd is not None else RECORD.open()
    os.write(fd, b"%d\n" % i)


@job(name="bench.hold")
async def hold(i: int, seconds: float) -> None:
    """Records ``i`` when it starts (as ``record`` does), then holds its slot for ``seconds``."""
    fd = RECORD.fd if RECORD.fd is not None else RECORD.open()
    os.write(fd, b"%d\n" % i)
    await asyncio.sleep(seconds)


ALL = [noop, sleep, latency, delayed, record, hold]


async def pass_through(job: dict[str, Any], call_next: Any) -> None:
    """A server middleware that does nothing but run the job: what a layer costs."""
    await call_next()
