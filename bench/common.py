"""Shared plumbing for the benchmarks: a private Redis, the worker subprocess,
medians over repeated runs, and output (a markdown table, or JSON with ``--json``).

Every run uses a fresh namespace and deletes its keys afterwards, so runs do
not see each other's jobs or counters. Without ``--redis-url`` a private
``redis-server`` (``EmbeddedRedis``) is started for the duration.

With ``--json`` stdout carries only the JSON document; the table and progress
notes go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from redis.asyncio import Redis

BENCH_DIR = Path(__file__).resolve().parent
WORKER_PROC = BENCH_DIR / "_worker_proc.py"
WEIGHTED_QUEUES = ("a:3", "b:2", "c:1")

Result = dict[str, Any]


# --- arguments and environment ----------------------------------------------------


def add_common_args(
    parser: argparse.ArgumentParser, *, repeat: bool = True, uvloop: bool = True
) -> None:
    parser.add_argument("--redis-url", help="use this Redis instead of a private redis-server")
    if repeat:
        parser.add_argument(
            "--repeat", type=int, default=3, help="runs per benchmark (median kept)"
        )
    parser.add_argument("--json", action="store_true", help="JSON on stdout, table on stderr")
    if uvloop:
        parser.add_argument("--uvloop", action="store_true", help="use uvloop if installed")


def note(message: str) -> None:
    """Progress and remarks: always stderr, so ``--json`` output stays parseable."""
    print(message, file=sys.stderr, flush=True)


@functools.cache
def uvloop_factory(requested: bool) -> tuple[Callable[[], asyncio.AbstractEventLoop] | None, str]:
    """The loop factory and its name; says so when uvloop was asked for but is missing."""
    if not requested:
        return None, "asyncio"
    try:
        import uvloop
    except ImportError:
        note("--uvloop: uvloop is not installed (pip install uvloop); using asyncio")
        return None, "asyncio"
    return uvloop.new_event_loop, "uvloop"


def run_async(coro: Coroutine[Any, Any, Any], *, use_uvloop: bool = False) -> Any:
    factory, _ = uvloop_factory(use_uvloop)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


@contextlib.contextmanager
def redis_server(url: str | None) -> Iterator[str]:
    """Yield a Redis URL: the one given, or a private embedded server's."""
    if url:
        yield url
        return
    from cogworker_async.embedded import EmbeddedRedis

    with EmbeddedRedis() as server:
        note(f"private redis-server at {server.url}")
        yield server.url


def new_namespace(label: str) -> str:
    return f"bench-{label}-{uuid.uuid4().hex[:8]}"


async def cleanup(url: str, namespace: str) -> None:
    """Delete every key of one run's namespace (never anything else)."""
    redis = Redis.from_url(url)
    try:
        batch: list[bytes] = []
        async for key in redis.scan_iter(match=f"{namespace}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                await redis.unlink(*batch)
                batch.clear()
        if batch:
            await redis.unlink(*batch)
    finally:
        await redis.aclose()


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = platform.processor() or ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name"):
                model = line.split(":", 1)[1].strip()
    redis_version = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["redis-server", "--version"], capture_output=True, text=True, check=False
        ).stdout
        redis_version = out.strip()
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "redis_server": redis_version,
        "loadavg_1m": os.getloadavg()[0],
    }


# --- timing and statistics ----------------------------------------------------------


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds`` (perf_counter)."""

    def __init__(self) -> None:
        self.start = 0.0
        self.seconds = 0.0

    def __enter__(self) -> Stopwatch:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (p99 of 1000 values is the 990th smallest)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def metric(label: str, unit: str, runs: Sequence[float]) -> dict[str, Any]:
    return {"label": label, "unit": unit, "median": median(runs), "runs": list(runs)}


def collect(
    name: str,
    title: str,
    params: dict[str, Any],
    runs: list[dict[str, float]],
    metrics: Sequence[tuple[str, str, str]],
) -> Result:
    """One benchmark's result: each (key, label, unit) metric over all runs."""
    return {
        "name": name,
        "title": title,
        "params": params,
        "metrics": {
            key: metric(label, unit, [run[key] for run in runs]) for key, label, unit in metrics
        },
        "runs": runs,
    }


async def repeat_runs(
    count: int, once: Callable[[int], Coroutine[Any, Any, dict[str, float]]], label: str
) -> list[dict[str, float]]:
    """Await ``once(i)`` ``count`` times in sequence, noting each run on stderr."""
    runs = []
    for i in range(count):
        run = await once(i)
        shown = ", ".join(f"{k}={_short(v)}" for k, v in run.items())
        note(f"  {label} run {i + 1}/{count}: {shown}")
        runs.append(run)
    return runs


def _short(value: float) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# --- the worker subprocess ------------------------------------------------------------


class WorkerProc:
    """``bench/_worker_proc.py`` in a subprocess: started, awaited for READY and its report."""

    def __init__(self, proc: asyncio.subprocess.Process, expected_loop: str = "asyncio") -> None:
        self.proc = proc
        self.expected_loop = expected_loop

    @classmethod
    async def start(
        cls,
        *,
        redis_url: str,
        namespace: str,
        queues: Sequence[str],
        concurrency: int,
        target: int,
        use_uvloop: bool = False,
        latency_key: str | None = None,
        give_up_after: float = 110.0,
        middleware: int = 0,
    ) -> WorkerProc:
        argv = [
            sys.executable, str(WORKER_PROC),
            "--redis-url", redis_url,
            "--namespace", namespace,
            "--concurrency", str(concurrency),
            "--target", str(target),
            "--timeout", str(give_up_after),
        ]  # fmt: skip
        for queue in queues:
            argv += ["--queue", queue]
        if latency_key:
            argv += ["--latency-key", latency_key]
        if middleware:
            argv += ["--middleware", str(middleware)]
        expected_loop = "asyncio"
        if use_uvloop and uvloop_factory(True)[0] is not None:
            argv.append("--uvloop")
            expected_loop = "uvloop"
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL
        )
        return cls(proc, expected_loop)

    async def ready(self, max_wait: float = 30.0) -> None:
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), max_wait)
        except TimeoutError:
            self.kill()
            raise RuntimeError("worker process did not become ready") from None
        if line.strip() != b"READY":
            self.kill()
            raise RuntimeError(f"worker process failed to start: {line!r}")

    async def report(self, max_wait: float = 130.0) -> dict[str, Any]:
        """Wait for the process to finish and return its JSON report."""
        try:
            out, _ = await asyncio.wait_for(self.proc.communicate(), max_wait)
        except TimeoutError:
            self.kill()
            raise RuntimeError("worker process did not finish in time") from None
        lines = [line for line in out.decode().splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"worker process exited {self.proc.returncode} without a report")
        result: dict[str, Any] = json.loads(lines[-1])
        if not result.get("ok"):
            raise RuntimeError(f"worker process reported a failure: {result}")
        # --uvloop must reach the worker process, not just this one.
        if result.get("loop") != self.expected_loop:
            raise RuntimeError(
                f"worker process ran on {result.get('loop')}, expected {self.expected_loop}"
            )
        return result

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


# --- the real worker command (``cogworker-async worker``) ----------------------------------

REPO_DIR = BENCH_DIR.parent


async def start_cli_worker(
    *,
    redis_url: str,
    namespace: str,
    processes: int = 1,
    concurrency: int = 50,
    module: str = "bench.jobs",
) -> asyncio.subprocess.Process:
    """``cogworker-async worker bench.jobs --processes N -c C`` as users run it.

    Started as ``python -m cogworker_async`` with this interpreter, from the
    repository root so that ``bench.jobs`` imports. With ``processes > 1`` the
    process is the supervisor (``swarm.py``) and the workers are its children.
    """
    argv = [
        sys.executable, "-m", "cogworker_async", "worker", module,
        "--processes", str(processes), "-c", str(concurrency),
        "--redis-url", redis_url, "--namespace", namespace, "--log-level", "WARNING",
    ]  # fmt: skip
    return await asyncio.create_subprocess_exec(
        *argv, cwd=REPO_DIR, stdin=asyncio.subprocess.DEVNULL
    )


async def wait_registered(
    redis: Redis, namespace: str, count: int, proc: asyncio.subprocess.Process, limit: float = 30.0
) -> None:
    """Until ``count`` worker processes have beaten (``<ns>:processes``)."""
    deadline = time.monotonic() + limit
    while int(await redis.scard(f"{namespace}:processes")) < count:
        if proc.returncode is not None:
            raise RuntimeError(f"worker command exited {proc.returncode} before it registered")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} worker process(es) not registered after {limit:.0f} s")
        await asyncio.sleep(0.02)


async def stop_cli_worker(proc: asyncio.subprocess.Process, limit: float = 40.0) -> int | None:
    """SIGTERM (a graceful stop, passed on to swarm children), then SIGKILL after ``limit``."""
    if proc.returncode is not None:
        return proc.returncode
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        return await asyncio.wait_for(proc.wait(), limit)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux ``/proc``)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found += [int(x) for x in handle.read().split()]
    return found


def proc_status_kb(pid: int, field: str = "VmRSS") -> int:
    """A ``/proc/<pid>/status`` memory field (VmRSS, VmHWM, ...) in kB."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (``/proc/<pid>/stat``, clock ticks)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runqueue_wait_seconds(pid: int) -> float:
    """Seconds the process's threads were runnable but not running (their schedstat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total += int(f.read().split()[1])
    return total / 1e9


def idle_cpu_seconds() -> float:
    """All CPUs' idle time so far (``/proc/stat``), in seconds."""
    with open("/proc/stat") as handle:
        fields = handle.readline().split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")


# --- output -------------------------------------------------------------------------------


def format_value(value: float, unit: str) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if unit == "jobs/s" or (unit == "µs/job" and value >= 20):
        return f"{value:,.0f}"
    if unit == "µs/job":
        return f"{value:.1f}"  # a few µs: the tenths are the difference
    if unit == "ms":
        return f"{value:,.1f}" if value >= 100 else f"{value:.2f}"
    return f"{value:.3g}"


def markdown_table(results: Sequence[Result]) -> str:
    rows = ["| Benchmark | Metric | Median | All runs |", "|---|---|---:|---|"]
    for result in results:
        title = result["title"]
        for entry in result["metrics"].values():
            unit = entry["unit"]
            runs = " / ".join(format_value(v, unit) for v in entry["runs"])
            rows.append(
                f"| {title} | {entry['label']} ({unit}) | "
                f"{format_value(entry['median'], unit)} | {runs} |"
            )
            title = ""
    return "\n".join(rows)


def emit(results: Sequence[Result], *, as_json: bool, extra: dict[str, Any] | None = None) -> None:
    """The table on stdout; with ``as_json`` the table on stderr and JSON on stdout."""
    table_to: TextIO = sys.stderr if as_json else sys.stdout
    print(markdown_table(results), file=table_to, flush=True)
    if as_json:
        document = {"machine": machine(), **(extra or {}), "results": list(results)}
        print(json.dumps(document, indent=2, default=str), flush=True)
