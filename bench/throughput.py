"""Throughput: how fast one worker process drains a queue that is already full.

Modes:
  noop      20,000 no-op ``async def`` jobs, concurrency 50, one queue
  middleware  the same through one pass-through server middleware
  weighted  20,000 no-op jobs split evenly over queues a:3, b:2, c:1, concurrency 50
  io        5,000 jobs that each ``await asyncio.sleep(0.01)``, concurrency 100
  limit_key, limit_global  noop with one per-key / one global concurrency limit
            that is never full (issue 23: what a limited job pays)
  fair      noop's 20,000 jobs, each fair over 100 keys (``limits.fair``): taken by turns

All jobs are enqueued first (``enqueue_many``, timed on its own), then a worker
starts in a subprocess (``bench/_worker_proc.py``). Its wall time runs from the
first job's start until ``<ns>:stats:processed`` reaches the total; CPU is the
worker process's ``time.process_time()`` over the same window.

    python bench/throughput.py --mode noop [--repeat 3] [--json] [--uvloop] [--history on|off]

``--history on|off`` sets ``COGWORKER_METRICS_HISTORY`` for the worker (the
metrics history's cost: BENCHMARKS.md); without it the setting's default.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from dataclasses import dataclass
from typing import Any

import common
import jobs

from cogworker_async import Client, Settings


@dataclass(frozen=True)
class Mode:
    name: str
    title: str
    total: int
    concurrency: int
    queues: tuple[str, ...]
    handler: Any
    sleep: float = 0.0  # seconds each job sleeps (io mode)
    middleware: int = 0  # pass-through server middleware layers in the worker


MODES = {
    "noop": Mode(
        "noop", "throughput noop (20,000 jobs, c=50, 1 queue)", 20_000, 50, ("default",),
        jobs.noop,
    ),
    "weighted": Mode(
        "weighted", "throughput weighted (20,000 jobs, c=50, a:3 b:2 c:1)", 20_000, 50,
        common.WEIGHTED_QUEUES, jobs.noop,
    ),
    # The opt-in extras of issue 13, on the no-op workload: what a job that
    # asks for them pays (a job that doesn't is the "noop" row).
    "status": Mode(
        "status", "throughput noop, status on (20,000 jobs, c=50, 1 queue)", 20_000, 50,
        ("default",), jobs.noop.options(status=True),
    ),
    "result": Mode(
        "result", "throughput noop, results kept (20,000 jobs, c=50, 1 queue)", 20_000, 50,
        ("default",), jobs.noop.options(keep_result=600),
    ),
    # A no-op job through one server middleware that only awaits call_next:
    # what a layer costs the worker (issue 26 §3).
    "middleware": Mode(
        "middleware", "throughput noop, 1 pass-through middleware (20,000 jobs, c=50, 1 queue)",
        20_000, 50, ("default",), jobs.noop, middleware=1,
    ),
    "io": Mode(
        "io", "throughput io (5,000 x sleep 10 ms, c=100)", 5_000, 100, ("default",), jobs.sleep,
        sleep=0.01,
    ),
}  # fmt: skip

# Issue 14's unique jobs: each job takes its lock at enqueue (enqueue_unique.lua, one
# call per job) and releases it after it ran (owner-checked, coalesced). Only in a
# tree that has them: the base of a same-run pair may not.
with contextlib.suppress(TypeError):
    MODES["unique"] = Mode(
        "unique",
        "throughput noop, unique until_executed (20,000 jobs, c=50, 1 queue)",
        20_000,
        50,
        ("default",),
        jobs.noop.options(unique="until_executed"),  # type: ignore[call-arg, unused-ignore]
    )

# Issue 23's limits (point 8): a no-op job with one per-key concurrency limit
# (1,000 keys of 50: never the bottleneck, so what is measured is the
# admission's cost), and one global limit of 1,000 (c=50: never full either).
with contextlib.suppress(ImportError, TypeError):
    from cogworker_async import limits

    MODES["limit_key"] = Mode(
        "limit_key",
        "throughput noop, 1 per-key concurrency limit (20,000 jobs, c=50, 1,000 keys)",
        20_000,
        50,
        ("default",),
        jobs.noop.options(limits=[limits.concurrency(lambda i: f"acct:{i % 1000}", 50)]),  # type: ignore[call-arg, unused-ignore]
    )
    MODES["limit_global"] = Mode(
        "limit_global",
        "throughput noop, global concurrency limit 1,000 (20,000 jobs, c=50)",
        20_000,
        50,
        ("default",),
        jobs.noop.options(limits=[limits.concurrency("g", 1000)]),  # type: ignore[call-arg, unused-ignore]
    )


# Issue 23 §4's fair keys: a job of key t<i % 100> is moved onto its key's line
# by the fetch and taken in turn. Only in a tree that has them.
with contextlib.suppress(AttributeError):
    from cogworker_async import limits

    MODES["fair"] = Mode(
        "fair",
        "throughput noop, fair over 100 keys (20,000 jobs, c=50, 1 queue)",
        20_000,
        50,
        ("default",),
        jobs.noop.options(limits=[limits.fair(lambda i: f"t{i % 100}")]),  # type: ignore[attr-defined, unused-ignore]
    )


def _batches(mode: Mode) -> list[tuple[Any, list[tuple[Any, ...]]]]:
    """(target, args) per queue: the jobs split as evenly as they go."""
    names = [spec.split(":")[0] for spec in mode.queues]
    batches = []
    for index, name in enumerate(names):
        target = mode.handler if name == "default" else mode.handler.options(queue=name)
        extra = (mode.sleep,) if mode.sleep else ()
        args = [(i, *extra) for i in range(index, mode.total, len(names))]
        batches.append((target, args))
    return batches


async def run_once(url: str, mode: Mode, *, use_uvloop: bool = False) -> dict[str, float]:
    namespace = common.new_namespace(f"tp-{mode.name}")
    try:
        batches = _batches(mode)
        async with Client(Settings(redis_url=url, namespace=namespace)) as client:
            with common.Stopwatch() as enqueue:
                for target, args in batches:
                    await client.enqueue_many(target, args)
        worker = await common.WorkerProc.start(
            redis_url=url,
            namespace=namespace,
            queues=mode.queues,
            concurrency=mode.concurrency,
            target=mode.total,
            use_uvloop=use_uvloop,
            middleware=mode.middleware,
        )
        try:
            report = await worker.report()
        finally:
            worker.kill()  # a no-op once it has exited; never left behind on an error
    finally:
        await common.cleanup(url, namespace)
    wall, cpu, redis_cpu = report["wall_s"], report["cpu_s"], report["redis_cpu_s"]
    run = {
        "jobs_per_s": mode.total / wall,
        "cpu_us_per_job": cpu / mode.total * 1e6,
        "worker_cpu_share": cpu / wall,
        "redis_cpu_us_per_job": redis_cpu / mode.total * 1e6,
        "enqueue_jobs_per_s": mode.total / enqueue.seconds,
        "wall_s": wall,
    }
    if mode.sleep:
        # The ceiling: every slot busy sleeping all the time, no overhead at all.
        run["ceiling_share"] = run["jobs_per_s"] / (mode.concurrency / mode.sleep)
    return run


async def bench(
    url: str, mode_name: str, *, repeat: int, use_uvloop: bool = False
) -> common.Result:
    mode = MODES[mode_name]
    common.note(f"{mode.title}: {repeat} run(s)")

    async def once(_: int) -> dict[str, float]:
        return await run_once(url, mode, use_uvloop=use_uvloop)

    runs = await common.repeat_runs(repeat, once, mode.name)
    metrics = [
        ("jobs_per_s", "processed", "jobs/s"),
        ("cpu_us_per_job", "worker CPU", "µs/job"),
        ("redis_cpu_us_per_job", "redis-server CPU", "µs/job"),
        ("worker_cpu_share", "worker CPU use", "cores"),
        ("enqueue_jobs_per_s", "enqueue_many", "jobs/s"),
    ]
    if mode.sleep:
        metrics.append(("ceiling_share", "share of concurrency/sleep ceiling", "ratio"))
    _, loop_name = common.uvloop_factory(use_uvloop)
    return common.collect(
        f"throughput-{mode.name}",
        mode.title,
        {
            "jobs": mode.total,
            "concurrency": mode.concurrency,
            "queues": list(mode.queues),
            "loop": loop_name,
        },
        runs,
        metrics,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async worker throughput")
    parser.add_argument("--mode", choices=sorted(MODES), default="noop")
    parser.add_argument(
        "--history", choices=("on", "off"), help="metrics history in the worker (default: its)"
    )
    common.add_common_args(parser)
    args = parser.parse_args()
    if args.history is not None:
        # The worker subprocess inherits it; Settings reads it from there.
        os.environ["COGWORKER_METRICS_HISTORY"] = "true" if args.history == "on" else "false"
    with common.redis_server(args.redis_url) as url:
        result = common.run_async(
            bench(url, args.mode, repeat=args.repeat, use_uvloop=args.uvloop),
            use_uvloop=args.uvloop,
        )
    common.emit([result], as_json=args.json)


if __name__ == "__main__":
    main()
