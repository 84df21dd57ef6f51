"""Multi-process throughput: ``--processes 2`` against ``--processes 1``, same no-op jobs.

Each run starts the real worker command,
``cogworker-async worker bench.jobs --processes N -c 50`` (as
``python -m cogworker_async`` from the repository root), on an empty queue and
waits until its N worker processes have registered (their first heartbeat) and
sat idle for a moment, so every process is in its blocking fetch. Then the
100,000 no-op jobs, enqueued beforehand with ``enqueue_many`` under a staging
namespace, are moved onto the worker's queue in one step (``RENAME`` of the
list, which wakes the blocked ``BLMOVE``): all processes start together and
process start-up is not part of the measurement.

This process then polls ``<ns>:stats:processed`` (incremented as each job's ack
reaches Redis) every 10 ms. The rate is (total - processed at the first
non-zero reading) / (time from that reading to the reading at the total):
from the first processed job to the last. Worker CPU is the user + system time
of the worker processes (``/proc/<pid>/stat``) over the same window, and
redis-server's from ``INFO cpu``.

The poll is this process's only work during the window, and it shares the
two cores with the workers and Redis: every 10 ms over 100,000 jobs (1.5 to
4 s) costs it under 1% of a core while placing each end of the window within
10 ms (under 1%); its own CPU is reported as ``bench_cpu_cores``.

Runs alternate (1 process, 2 processes, 1, 2, ...) so that background load
falls on both alike; the ratio is also computed per round, beside the most
the machine's CPU allows it to be: all its cores divided by the cores one
process's run kept busy (worker + redis-server + this poll). On 2 cores with
Redis on them, a worker that needs little Redis time per job of its own
(about 0.4 µs of Redis per µs of worker here) cannot reach 2x.

    python bench/multiprocess.py [--jobs 100000] [--concurrency 50] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import common
import jobs
from redis.asyncio import Redis

from cogworker_async import Client, Settings
from cogworker_async.keys import Keys


def common_cores() -> int:
    return os.cpu_count() or 1


SETTLE = 0.5  # seconds idle after registering: every process is in its blocking fetch
POLL = 0.010


async def _redis_cpu(redis: Redis) -> float:
    info = await redis.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def run_once(url: str, processes: int, total: int, concurrency: int) -> dict[str, float]:
    namespace = common.new_namespace(f"mp{processes}")
    staging = f"{namespace}-staging"
    redis = Redis.from_url(url)
    proc = None
    try:
        async with Client(Settings(redis_url=url, namespace=staging)) as client:
            await client.enqueue_many(jobs.noop, [(i,) for i in range(total)])
        proc = await common.start_cli_worker(
            redis_url=url, namespace=namespace, processes=processes, concurrency=concurrency
        )
        await common.wait_registered(redis, namespace, processes, proc)
        await asyncio.sleep(SETTLE)
        workers = common.child_pids(proc.pid) if processes > 1 else [proc.pid]
        if len(workers) != processes:
            raise RuntimeError(f"expected {processes} worker processes, found {workers}")
        keys = Keys(namespace)
        processed_key = keys.stats_processed
        cpu_before = sum(common.cpu_seconds(pid) for pid in workers)
        waited_before = sum(common.runqueue_wait_seconds(pid) for pid in workers)
        idle_before = common.idle_cpu_seconds()
        bench_before = time.process_time()
        redis_before = await _redis_cpu(redis)
        await redis.rename(Keys(staging).queue("default"), keys.queue("default"))
        await redis.sadd(keys.queues, "default")
        first: tuple[float, int] | None = None
        deadline = time.monotonic() + 110
        while True:
            done = int(await redis.get(processed_key) or 0)
            now = time.perf_counter()
            if first is None and done > 0:
                first = (now, done)
            if done >= total:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {done} of {total} jobs processed after 110 s")
            await asyncio.sleep(POLL)
        cpu = sum(common.cpu_seconds(pid) for pid in workers) - cpu_before
        waited = sum(common.runqueue_wait_seconds(pid) for pid in workers) - waited_before
        idle = common.idle_cpu_seconds() - idle_before
        bench_cpu = time.process_time() - bench_before
        redis_cpu = await _redis_cpu(redis) - redis_before
        failed = int(await redis.get(keys.stats_failed) or 0)
        if failed:
            raise RuntimeError(f"{failed} jobs failed")
    finally:
        if proc is not None:
            code = await common.stop_cli_worker(proc)
            if code != 0:
                common.note(f"  worker command exited {code} on SIGTERM")
        await redis.aclose()
        await common.cleanup(url, namespace)
        await common.cleanup(url, staging)
    assert first is not None
    wall = now - first[0]
    counted = total - first[1]
    return {
        "jobs_per_s": counted / wall,
        "wall_s": wall,
        "counted_jobs": float(counted),
        "worker_cpu_cores": cpu / wall,
        "redis_cpu_cores": redis_cpu / wall,
        # Runnable but not running, while (idle) some CPU ran nothing at all:
        # both at once means the scheduler, not a lack of cores, held it back.
        "worker_runqueue_wait_cores": waited / wall,
        "idle_cpu_cores": idle / wall,
        "bench_cpu_cores": bench_cpu / wall,
    }


async def bench(
    url: str, *, total: int = 100_000, concurrency: int = 50, repeat: int = 3
) -> common.Result:
    title = f"multi-process noop ({total:,} jobs, c={concurrency} per process, 1 queue)"
    common.note(f"{title}: {repeat} round(s) of --processes 1 then --processes 2")
    load_before = common.machine()["loadavg_1m"]

    async def once(_: int) -> dict[str, float]:
        one = await run_once(url, 1, total, concurrency)
        two = await run_once(url, 2, total, concurrency)
        return {
            "p1_jobs_per_s": one["jobs_per_s"],
            "p2_jobs_per_s": two["jobs_per_s"],
            "ratio": two["jobs_per_s"] / one["jobs_per_s"],
            # Two cores at most for everything: two processes need the CPU one
            # process, its Redis share and this poll used, per job, twice over.
            "ratio_bound": common_cores()
            / (one["worker_cpu_cores"] + one["redis_cpu_cores"] + one["bench_cpu_cores"]),
            "p1_worker_cpu_cores": one["worker_cpu_cores"],
            "p2_worker_cpu_cores": two["worker_cpu_cores"],
            "p1_redis_cpu_cores": one["redis_cpu_cores"],
            "p2_redis_cpu_cores": two["redis_cpu_cores"],
            "p2_bench_cpu_cores": two["bench_cpu_cores"],
            "p2_runqueue_wait_cores": two["worker_runqueue_wait_cores"],
            "p2_idle_cpu_cores": two["idle_cpu_cores"],
        }

    runs = await common.repeat_runs(repeat, once, "multiprocess")
    result = common.collect(
        "multiprocess",
        title,
        {
            "jobs": total,
            "concurrency": concurrency,
            "command": "cogworker-async worker bench.jobs --processes N -c 50",
            "loadavg_1m_before": load_before,
            "loadavg_1m_after": common.machine()["loadavg_1m"],
        },
        runs,
        [
            ("p1_jobs_per_s", "--processes 1", "jobs/s"),
            ("p2_jobs_per_s", "--processes 2", "jobs/s"),
            ("ratio", "2 processes / 1 (per round)", "ratio"),
            ("ratio_bound", "most the CPU allows: cores / cores used by 1 process", "ratio"),
            ("p1_worker_cpu_cores", "worker CPU, 1 process", "cores"),
            ("p2_worker_cpu_cores", "worker CPU, 2 processes (sum)", "cores"),
            ("p1_redis_cpu_cores", "redis-server CPU, 1 process", "cores"),
            ("p2_redis_cpu_cores", "redis-server CPU, 2 processes", "cores"),
            ("p2_bench_cpu_cores", "this benchmark's own CPU, 2 processes", "cores"),
            ("p2_runqueue_wait_cores", "workers runnable, not running, 2 processes", "cores"),
            ("p2_idle_cpu_cores", "CPU idle meanwhile, 2 processes", "cores"),
        ],
    )
    p1 = result["metrics"]["p1_jobs_per_s"]["median"]
    p2 = result["metrics"]["p2_jobs_per_s"]["median"]
    result["ratio_of_medians"] = p2 / p1
    common.note(f"  ratio of medians: {p2:,.0f} / {p1:,.0f} = {p2 / p1:.2f}x (target >= 1.7x)")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async --processes 2 vs 1")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=50)
    # No --uvloop: the worker command has no such option (it runs asyncio.run).
    common.add_common_args(parser, uvloop=False)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        result = common.run_async(
            bench(url, total=args.jobs, concurrency=args.concurrency, repeat=args.repeat)
        )
    common.emit([result], as_json=args.json)


if __name__ == "__main__":
    main()
