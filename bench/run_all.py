"""Every benchmark in one go, against one private Redis: one markdown table.

Runs throughput (noop, weighted, io), latency (one queue, three weighted
queues), delayed-job lateness (``delay_latency.py``), enqueue, the
raw-protocol floor (``floor.py``) and multi-process throughput (``--processes 2`` against 1,
always on asyncio: the worker command has no uvloop option), each
``--repeat`` times, and prints the medians with all runs. ``make bench`` runs
``.venv/bin/python bench/run_all.py --repeat 3`` and then ``bench/soak.py``.

    python bench/run_all.py [--repeat 3] [--json] [--uvloop] [--redis-url URL]

With ``--json`` the table goes to stderr and a JSON document (machine, all
runs) to stdout.
"""

from __future__ import annotations

import argparse
import os
import time

import common
import delay_latency
import enqueue
import floor
import latency
import multiprocess
import throughput


async def run_all(url: str, *, repeat: int, use_uvloop: bool) -> list[common.Result]:
    results = [
        await throughput.bench(url, mode, repeat=repeat, use_uvloop=use_uvloop)
        for mode in ("noop", "weighted", "io")
    ]
    for queue_count in (1, 3):
        results.append(
            await latency.bench(url, queue_count=queue_count, repeat=repeat, use_uvloop=use_uvloop)
        )
    results.append(await delay_latency.bench(url, repeat=repeat, use_uvloop=use_uvloop))
    results.extend(await enqueue.bench(url, repeat=repeat))
    results.extend(await floor.bench(url, repeat=repeat))
    results.append(await multiprocess.bench(url, repeat=repeat))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description="all cogworker_async benchmarks")
    common.add_common_args(parser)
    args = parser.parse_args()
    info = common.machine()
    common.note(
        f"machine: {info['nproc']} CPUs, {info['cpu']}, Python {info['python']}, "
        f"{info['redis_server']}"
    )
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with common.redis_server(args.redis_url) as url:
        results = common.run_async(
            run_all(url, repeat=args.repeat, use_uvloop=args.uvloop), use_uvloop=args.uvloop
        )
    elapsed = time.perf_counter() - started
    _, loop_name = common.uvloop_factory(args.uvloop)
    common.note(
        f"all benchmarks: {elapsed:.0f} s, --repeat {args.repeat}, {loop_name} loop, "
        f"1-min load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    common.emit(
        results,
        as_json=args.json,
        extra={
            "repeat": args.repeat,
            "loop": loop_name,
            "elapsed_s": elapsed,
            "loadavg_1m_before": load_before,
        },
    )


if __name__ == "__main__":
    main()
