"""Where a no-op job's time goes in the worker: py-spy samples of a worker draining a queue.

The real worker command (``cogworker-async worker bench.jobs -c 50``, one
process) starts on an empty queue and registers; ``py-spy record`` attaches to
it with ``--nonblocking`` (the worker is never paused) and ``--threads``.
Non-blocking samples are unbiased in time but a stack that changes while it is
read comes back cut short at the root end; py-spy reads from the innermost
frame outwards, so self time (the innermost frame) is sound while inclusive
time is a lower bound (the share of cut stacks is printed). The blocking mode
was tried and rejected: it put about 30% of self time on the ``await`` line
of ``Fetcher.get``, which cProfile (about 1%) and the non-blocking samples
do not confirm; stopping the process to sample is itself a bias.

Then ``--jobs`` no-op jobs, enqueued beforehand under a staging namespace,
are moved onto its queue in one ``RENAME``, and the run lasts until
``<ns>:stats:processed`` reaches the total. py-spy keeps only samples in which
it judges a thread active (not sleeping in ``epoll_wait`` or on a lock; the
judgement is heuristic, so the sampled total can exceed the CPU measured), so
the profile is where CPU time goes; the worker's own CPU and wall time over
the window (``/proc/<pid>/stat``) say how much of the wall time that is.

Printed: samples per thread; for the event-loop (main) thread the self time by
module and by function, and the inclusive time of the heaviest
``cogworker_async`` functions, each as a share of that thread's active samples
and as µs per job. The raw collapsed stacks are kept in ``--out``.

Needs ``py-spy`` (``pip install py-spy``); without it, says so and exits 2.

    python bench/profile_worker.py [--jobs 300000] [--rate 500] [--json] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import common
import jobs
from redis.asyncio import Redis

from cogworker_async import Client, Settings
from cogworker_async.keys import Keys

FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
THREAD = re.compile(r"^thread \((?P<tid>0x[0-9A-Fa-f]+|\d+)\)(?::\s*(?P<name>.*))?$")
SETTLE = 0.5


def _frame(text: str) -> tuple[str, str]:
    """(function, file) of one py-spy frame ``func (path/file.py:123)``."""
    match = FRAME.match(text)
    if not match:
        return text, ""
    return match["func"], match["file"]


def _module(path: str) -> str:
    """A short module label: ``cogworker_async/worker/fetcher.py``, ``asyncio/events.py``."""
    parts = Path(path).parts
    for anchor in ("cogworker_async", "redis", "anyio", "asyncio", "bench", "hiredis"):
        if anchor in parts:
            index = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[index:])
    return Path(path).name or path


def _layer(path: str) -> str:
    """Which layer a leaf frame belongs to."""
    module = _module(path)
    if module == "selectors.py":
        return "epoll_wait (selectors)"
    for prefix, layer in (
        ("asyncio/", "asyncio event loop, tasks, transports"),
        ("redis/", "redis-py (commands, encoding, connection)"),
        ("anyio/", "anyio"),
        ("cogworker_async/", "cogworker_async"),
        ("bench/", "the job handler (bench/jobs.py)"),
    ):
        if module.startswith(prefix):
            return layer
    return "other"


def analyse(raw: str, main_tid: int, rate: float, jobs_done: int) -> dict[str, Any]:
    """Aggregate py-spy's collapsed stacks (``frame;frame;... count`` per line)."""
    per_thread: collections.Counter[str] = collections.Counter()
    self_module: collections.Counter[str] = collections.Counter()
    self_layer: collections.Counter[str] = collections.Counter()
    self_func: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    main_total = 0
    truncated = 0
    for line in raw.splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack_text.split(";")
        thread = THREAD.match(frames[0])
        tid = int(thread["tid"], 0) if thread else -1
        if thread:
            frames = frames[1:]
        name = (thread["name"] if thread else None) or "?"
        per_thread["MainThread (event loop)" if tid == main_tid else name] += count
        if tid != main_tid or not frames:
            continue
        main_total += count
        if not any(f.startswith("_run_once ") or "._run_once " in f for f in frames):
            truncated += count
        func, path = _frame(frames[-1])
        self_module[_module(path)] += count
        self_layer[_layer(path)] += count
        self_func[f"{func} ({_module(path)})"] += count
        seen = set()
        for text in frames:
            func, path = _frame(text)
            if "cogworker_async" in path:
                name = f"{func} ({_module(path)})"
                if name not in seen:
                    seen.add(name)
                    inclusive[name] += count

    def table(counter: collections.Counter[str], top: int) -> list[dict[str, Any]]:
        return [
            {
                "name": name,
                "samples": n,
                "share": n / main_total if main_total else 0.0,
                "us_per_job": n / rate / jobs_done * 1e6,
            }
            for name, n in counter.most_common(top)
        ]

    return {
        "samples_by_thread": dict(per_thread.most_common()),
        "main_thread_samples": main_total,
        "main_thread_cpu_s_sampled": main_total / rate,
        "truncated_share": truncated / main_total if main_total else 0.0,
        "self_by_layer": table(self_layer, 10),
        "self_by_module": table(self_module, 15),
        "self_by_function": table(self_func, 20),
        "inclusive_cogworker": table(inclusive, 20),
    }


# What each --job profiles: the job function and the concurrency it runs at
# (the throughput benchmark's no-op and I/O-bound workloads).
WORKLOADS = {"noop": (jobs.noop, 50), "sleep": (jobs.sleep, 100)}


async def run(
    url: str, *, total: int, rate: float, out: Path, pyspy: str, workload: str = "noop"
) -> dict[str, Any]:
    """Profile one drain; returns py-spy's raw text and the window's pid, wall and CPU."""
    function, concurrency = WORKLOADS[workload]
    namespace = common.new_namespace("prof")
    staging = f"{namespace}-staging"
    redis = Redis.from_url(url)
    proc = spy = None
    try:
        async with Client(Settings(redis_url=url, namespace=staging)) as client:
            for start in range(0, total, 100_000):
                ids = range(start, min(start + 100_000, total))
                await client.enqueue_many(function, [(i,) for i in ids])
        proc = await common.start_cli_worker(
            redis_url=url, namespace=namespace, concurrency=concurrency
        )
        await common.wait_registered(redis, namespace, 1, proc)
        spy = await asyncio.create_subprocess_exec(
            pyspy, "record", "--pid", str(proc.pid), "--rate", f"{rate:g}", "--format", "raw",
            "--nonblocking", "--threads", "-o", str(out),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        await asyncio.sleep(SETTLE)
        keys = Keys(namespace)
        cpu_before = common.cpu_seconds(proc.pid)
        began = time.perf_counter()
        await redis.rename(Keys(staging).queue("default"), keys.queue("default"))
        deadline = time.monotonic() + 300
        while int(await redis.get(keys.stats_processed) or 0) < total:
            if time.monotonic() > deadline:
                raise RuntimeError("the jobs did not finish within 300 s")
            await asyncio.sleep(0.01)
        wall = time.perf_counter() - began
        cpu = common.cpu_seconds(proc.pid) - cpu_before
        spy.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(spy.communicate(), 60)
        if spy.returncode not in (0, -signal.SIGINT):
            raise RuntimeError(f"py-spy failed ({spy.returncode}): {err.decode()[-500:]}")
        pid = proc.pid
    finally:
        if spy is not None and spy.returncode is None:
            spy.kill()
        if proc is not None:
            await common.stop_cli_worker(proc)
        await redis.aclose()
        await common.cleanup(url, namespace)
        await common.cleanup(url, staging)
    return {
        "raw": raw_text(out),
        "pid": pid,
        "wall": wall,
        "cpu": cpu,
        "err": err,
        "workload": workload,
        "concurrency": concurrency,
    }


def raw_text(out: Path) -> str:
    if not out.exists():
        raise RuntimeError(f"py-spy wrote no {out}")
    return out.read_text()


def summarize(measured: dict[str, Any], *, total: int, rate: float, out: Path) -> dict[str, Any]:
    wall, cpu, err = measured["wall"], measured["cpu"], measured["err"]
    result = analyse(measured["raw"], measured["pid"], rate, total)
    result.update(
        workload=measured["workload"],
        concurrency=measured["concurrency"],
        jobs=total,
        rate_hz=rate,
        wall_s=wall,
        jobs_per_s=total / wall,
        worker_cpu_s=cpu,
        worker_cpu_us_per_job=cpu / total * 1e6,
        worker_cpu_cores=cpu / wall,
        raw_file=str(out),
        pyspy_stderr=err.decode(errors="replace").strip().splitlines()[-1:],
    )
    return result


def markdown(result: dict[str, Any]) -> str:
    out = [
        f"profile: {result['jobs']:,} {result['workload']} jobs, one worker "
        f"(c={result['concurrency']}), py-spy at "
        f"{result['rate_hz']:g} Hz (non-blocking): {result['wall_s']:.2f} s wall "
        f"({result['jobs_per_s']:,.0f} jobs/s); worker CPU {result['worker_cpu_s']:.2f} s "
        f"({result['worker_cpu_us_per_job']:.1f} µs/job, {result['worker_cpu_cores']:.2f} cores "
        f"incl. the sampler's reads); sampled active time in the event-loop thread "
        f"{result['main_thread_cpu_s_sampled']:.2f} s",
        "",
        "Active samples by thread: "
        + ", ".join(f"{k} {v}" for k, v in result["samples_by_thread"].items()),
    ]
    for title, key in (
        ("Event-loop thread, self time by layer", "self_by_layer"),
        ("Event-loop thread, self time by module", "self_by_module"),
        ("Event-loop thread, self time by function", "self_by_function"),
        (
            "Event-loop thread, inclusive time of cogworker_async functions (lower bounds: "
            f"{result['truncated_share']:.0%} of stacks were cut short at the root end)",
            "inclusive_cogworker",
        ),
    ):
        out += ["", title + ":", "", "| | share | µs/job |", "|---|---:|---:|"]
        for row in result[key]:
            out.append(f"| `{row['name']}` | {row['share']:.1%} | {row['us_per_job']:.2f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description="py-spy profile of the worker")
    parser.add_argument("--jobs", type=int, default=300_000)
    parser.add_argument(
        "--job",
        choices=sorted(WORKLOADS),
        default="noop",
        help="no-op jobs at c=50, or 10 ms asyncio.sleep jobs at c=100",
    )
    parser.add_argument("--rate", type=float, default=500.0, help="py-spy samples per second")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where py-spy's collapsed stacks go (default results/profile-<job>.txt)",
    )
    common.add_common_args(parser, repeat=False, uvloop=False)
    args = parser.parse_args()
    pyspy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if pyspy is None:
        common.note("py-spy is not installed (pip install py-spy)")
        sys.exit(2)
    if args.out is None:
        args.out = common.BENCH_DIR / "results" / f"profile-{args.job}.txt"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with common.redis_server(args.redis_url) as url:
        measured = common.run_async(
            run(url, total=args.jobs, rate=args.rate, out=args.out, pyspy=pyspy, workload=args.job)
        )
    result = summarize(measured, total=args.jobs, rate=args.rate, out=args.out)
    machine = common.machine()
    print(markdown(result), file=sys.stderr if args.json else sys.stdout, flush=True)
    if args.json:
        print(json.dumps({"machine": machine, "profile": result}, indent=2), flush=True)


if __name__ == "__main__":
    main()
