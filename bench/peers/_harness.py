"""The measuring half of every ``bench/peers/*_driver.py``: standard library only.

Each driver runs with its own peer's virtualenv (``bench/.peers/<name>/``),
where neither ``cogworker_async`` nor ``bench/common.py`` is installed, so the
timing, the worker subprocess and the JSON report live here and nowhere else.
A driver supplies only what differs between libraries (see ``Driver``): how to
enqueue, how to run its worker, and how to ask Redis whether every job has
been acknowledged.

One invocation measures one workload once and prints one JSON line::

    python bench/peers/arq_driver.py --redis-url URL --workload noop [--jobs N]

Workloads, the same for every library:

``noop``     20,000 jobs whose handler does nothing, concurrency 50
``io``       5,000 jobs that each ``await asyncio.sleep(0.01)``, concurrency 100
``latency``  1,000 jobs enqueued one at a time at 200/s onto an idle worker
             (concurrency 50); each job's start minus ``time.time()`` taken just
             before its enqueue call

Throughput (``noop``, ``io``): every job is enqueued first (timed on its own),
then the worker starts in a subprocess (``--role worker``, the same script).
Its clock runs from the start of the first job's handler until every handler
has returned *and* the library's own Redis state shows no job left unfinished
(its acknowledgement has landed: for example arq's queue sorted set is empty,
taskiq's consumer group has nothing pending). CPU is that process's
``time.process_time()`` over the same window. Start-up, connecting and
enqueueing are outside the window, for every library alike.

Latency: the worker subprocess starts first, sits idle for ``--idle`` seconds
(so it waits in its blocking read or poll loop, as a quiet production worker
would), then this process enqueues at a steady rate; the worker keeps every
job's (start - sent_at) and reports percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # "throughput" or "latency"
    jobs: int
    concurrency: int
    sleep: float = 0.0  # seconds each job sleeps (io)
    rate: float = 0.0  # jobs enqueued per second (latency)


WORKLOADS = {
    "noop": Workload("noop", "throughput", 20_000, 50),
    "io": Workload("io", "throughput", 5_000, 100, sleep=0.01),
    "latency": Workload("latency", "latency", 1_000, 50, rate=200.0),
}

IDLE_BEFORE = 2.5  # seconds the latency worker idles before the first job
ACK_POLL = 0.005  # seconds between "anything unfinished?" checks, after the last handler


# --- what the handlers record -------------------------------------------------------


class State:
    """Handler bookkeeping in the worker process."""

    def __init__(self) -> None:
        self.first_wall: float | None = None
        self.first_cpu: float | None = None
        self.finished = 0
        self.target = 0
        self.latencies: list[float] = []
        self.done: asyncio.Event | None = None

    def start(self) -> None:
        if self.first_wall is None:
            self.first_wall = time.perf_counter()
            self.first_cpu = time.process_time()

    def finish(self) -> None:
        self.finished += 1
        if self.finished >= self.target and self.done is not None:
            self.done.set()


STATE = State()


def noop(i: int) -> None:
    """The whole body of every library's no-op handler."""
    STATE.start()
    STATE.finish()


async def sleep(i: int, seconds: float) -> None:
    """The whole body of every library's I/O-bound handler."""
    STATE.start()
    await asyncio.sleep(seconds)
    STATE.finish()


def latency(i: int, sent_at: float) -> None:
    """The whole body of every library's latency handler."""
    STATE.latencies.append(time.time() - sent_at)
    STATE.start()
    STATE.finish()


# --- what a driver supplies -----------------------------------------------------------


Send = Callable[[int, float], Awaitable[Any]]


class Driver(Protocol):
    name: str
    options: dict[str, str]  # from --set KEY=VALUE (for variants; usually empty)

    def versions(self) -> dict[str, str]:
        """Package versions that matter (the library, its Redis client)."""

    def settings(self, workload: Workload) -> dict[str, Any]:
        """How the worker is configured for this workload, for the report."""

    async def enqueue_all(self, url: str, workload: Workload) -> None:
        """Enqueue ``workload.jobs`` jobs (args ``(i,)`` or ``(i, sleep)``)."""

    def producer(self, url: str) -> contextlib.AbstractAsyncContextManager[Send]:
        """An open client whose ``send(i, sent_at)`` enqueues one latency job."""

    async def serve(
        self, url: str, workload: Workload, started: asyncio.Event, stop: asyncio.Event
    ) -> None:
        """Run the library's worker; set ``started`` once it runs, stop after ``stop``."""

    async def unfinished(self, url: str, workload: Workload) -> int:
        """Jobs the library's Redis state still holds as not done (0 = all acknowledged)."""


# --- running it -------------------------------------------------------------------------


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (p99 of 1000 values is the 990th smallest)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


async def _worker_role(driver: Driver, args: argparse.Namespace, workload: Workload) -> dict:
    STATE.target = workload.jobs
    STATE.done = asyncio.Event()
    started, stop = asyncio.Event(), asyncio.Event()
    serving = asyncio.create_task(driver.serve(args.redis_url, workload, started, stop))
    try:
        await _until(started.wait(), serving, 30.0, "the worker did not start")
        print("READY", flush=True)
        await _until(STATE.done.wait(), serving, args.timeout, "not every job ran")
        # Every handler has returned: now wait for the last acknowledgements.
        deadline = time.monotonic() + 30.0
        while await driver.unfinished(args.redis_url, workload) > 0:
            if time.monotonic() > deadline:
                raise RuntimeError("jobs still unfinished in Redis 30 s after the last handler")
            await asyncio.sleep(ACK_POLL)
        end_wall, end_cpu = time.perf_counter(), time.process_time()
    finally:
        stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(serving), 20.0)
        except BaseException:
            serving.cancel()
            with contextlib.suppress(BaseException):
                await serving
    assert STATE.first_wall is not None
    assert STATE.first_cpu is not None
    wall, cpu = end_wall - STATE.first_wall, end_cpu - STATE.first_cpu
    result: dict[str, Any] = {"handler_calls": STATE.finished, "wall_s": wall, "cpu_s": cpu}
    if workload.kind == "throughput":
        result.update(jobs_per_s=workload.jobs / wall, cpu_us_per_job=cpu / workload.jobs * 1e6)
    else:
        millis = [v * 1000 for v in STATE.latencies]
        result.update(
            p50_ms=percentile(millis, 50),
            p99_ms=percentile(millis, 99),
            max_ms=max(millis),
            samples=len(millis),
        )
    return result


async def _until(
    waiter: Awaitable[Any], serving: asyncio.Task[None], limit: float, what: str
) -> None:
    """Wait for ``waiter``; fail fast if the worker task ends first or time runs out."""
    wait_task = asyncio.ensure_future(waiter)
    done, _ = await asyncio.wait({wait_task, serving}, timeout=limit, return_when="FIRST_COMPLETED")
    if wait_task in done:
        return
    wait_task.cancel()
    if serving in done:
        exc = serving.exception()
        raise RuntimeError(f"{what}: the worker stopped early ({exc!r})")
    raise RuntimeError(f"{what} within {limit:.0f} s (handlers finished: {STATE.finished})")


class _Child:
    """This script again, as ``--role worker``."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, args: argparse.Namespace) -> _Child:
        argv = [
            sys.executable, sys.argv[0], "--role", "worker",
            "--redis-url", args.redis_url, "--workload", args.workload,
            "--jobs", str(args.jobs), "--timeout", str(args.timeout),
        ]  # fmt: skip
        for item in args.set:
            argv += ["--set", item]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL
        )
        return cls(proc)

    async def ready(self) -> None:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60.0)
        if line.strip() != b"READY":
            raise RuntimeError(f"worker process failed to start (said {line!r})")

    async def report(self, limit: float) -> dict[str, Any]:
        out, _ = await asyncio.wait_for(self.proc.communicate(), limit)
        lines = [x for x in out.decode().splitlines() if x.startswith("{")]
        if not lines:
            raise RuntimeError(f"worker process exited {self.proc.returncode} without a report")
        report: dict[str, Any] = json.loads(lines[-1])
        if not report.get("ok"):
            raise RuntimeError(f"worker process failed: {report.get('error')}")
        return report

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


async def _driver_role(driver: Driver, args: argparse.Namespace, workload: Workload) -> dict:
    result: dict[str, Any] = {}
    if workload.kind == "throughput":
        began = time.perf_counter()
        await driver.enqueue_all(args.redis_url, workload)
        result["enqueue_jobs_per_s"] = workload.jobs / (time.perf_counter() - began)
        child = await _Child.start(args)
        try:
            result.update(await child.report(args.timeout + 40))
        finally:
            child.kill()
        return result
    child = await _Child.start(args)
    try:
        await child.ready()
        await asyncio.sleep(args.idle)
        async with driver.producer(args.redis_url) as send:
            loop = asyncio.get_running_loop()
            start = loop.time()
            for i in range(workload.jobs):
                # Absolute deadlines: one slow enqueue does not push every later one back.
                delay = start + i / workload.rate - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                await send(i, time.time())
            result["sent_per_s"] = workload.jobs / (loop.time() - start)
        result.update(await child.report(args.timeout + 40))
    finally:
        child.kill()
    return result


def main(driver: Driver) -> None:
    parser = argparse.ArgumentParser(description=f"{driver.name}: one peer benchmark workload")
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    parser.add_argument("--jobs", type=int, help="override the workload's job count")
    parser.add_argument("--role", choices=("driver", "worker"), default="driver")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds for the jobs to run")
    parser.add_argument("--idle", type=float, default=IDLE_BEFORE)
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: always JSON")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="a driver-specific setting (see the driver's docstring)",
    )  # fmt: skip
    args = parser.parse_args()
    driver.options = dict(item.split("=", 1) for item in args.set)
    base = WORKLOADS[args.workload]
    workload = Workload(**{**asdict(base), "jobs": args.jobs or base.jobs})
    args.jobs = workload.jobs
    # No library's per-job INFO logging is shown, so none of them pays for printing it.
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    role = _worker_role if args.role == "worker" else _driver_role
    report: dict[str, Any] = {
        "peer": driver.name,
        "workload": workload.name,
        "jobs": workload.jobs,
        "concurrency": workload.concurrency,
    }
    try:
        report.update(asyncio.run(role(driver, args, workload)))
        report["ok"] = True
    except BaseException as exc:
        traceback.print_exc(file=sys.stderr)
        report.update(ok=False, error=f"{type(exc).__name__}: {exc}")
    if args.role == "driver":
        report["versions"] = {"python": platform.python_version(), **driver.versions()}
        report["settings"] = driver.settings(workload)
        report["pid"] = os.getpid()
    print(json.dumps(report), flush=True)
    sys.exit(0 if report["ok"] else 1)


def version_of(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


async def gather_chunked(calls: Iterable[Awaitable[Any]], chunk: int = 100) -> None:
    """Await the awaitables ``chunk`` at a time (for libraries without a bulk enqueue)."""
    batch: list[Awaitable[Any]] = []
    for call in calls:
        batch.append(call)
        if len(batch) >= chunk:
            await asyncio.gather(*batch)
            batch.clear()
    if batch:
        await asyncio.gather(*batch)


async def until_stopped(stop: asyncio.Event, running: asyncio.Task[Any]) -> None:
    """Wait for ``stop``; if the library's worker task ends first, raise (with its error)."""
    stopper = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait({stopper, running}, return_when="FIRST_COMPLETED")
    if running in done:
        stopper.cancel()
        running.result()
        raise RuntimeError("the worker returned before it was asked to stop")
