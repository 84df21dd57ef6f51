"""Soak: one worker process runs a million no-op jobs; does its memory stay flat?

The real worker command, ``cogworker-async worker bench.jobs -c 50`` (one
process, as ``python -m cogworker_async`` from the repository root), runs
while this process feeds it: ``enqueue_many`` in chunks of ``--chunk`` jobs
whenever the queue is short enough that the backlog stays at or below
``--backlog``. Every ``--sample-every`` processed jobs (``<ns>:stats:processed``)
the worker's resident memory is read from ``/proc/<pid>/status`` (VmRSS),
with redis-server's ``used_memory``.

Reported: the samples; the first (taken after the first ``--sample-every``
jobs, i.e. after warm-up), last and largest RSS; the drift (last against
first) and the largest deviation from the first. The target is flat within
±10% after warm-up.

Afterwards every key left under the run's namespace is listed with its type,
size and TTL: once while the worker idles after the last job, and once after
it has been stopped with SIGTERM (a graceful stop). The run's keys are then
deleted.

    python bench/soak.py [--jobs 1000000] [--sample-every 100000] [--backlog 50000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import common
import jobs
from redis.asyncio import Redis

from cogworker_async import Client, Settings
from cogworker_async.keys import Keys

POLL = 0.005
IDLE_BEFORE_LISTING = 1.0


async def key_report(redis: Redis, namespace: str) -> list[dict[str, Any]]:
    """Every key under ``namespace:``: type, size (elements or bytes), TTL, small values."""
    sizes = {
        "list": redis.llen,
        "set": redis.scard,
        "zset": redis.zcard,
        "hash": redis.hlen,
        "stream": redis.xlen,
        "string": redis.strlen,
    }
    found = []
    async for raw in redis.scan_iter(match=f"{namespace}:*", count=1000):
        key = raw.decode()
        kind = (await redis.type(raw)).decode()
        size = int(await sizes[kind](raw)) if kind in sizes else -1
        entry: dict[str, Any] = {"key": key, "type": kind, "size": size}
        ttl = int(await redis.pttl(raw))
        entry["ttl_s"] = None if ttl < 0 else round(ttl / 1000, 1)
        if kind == "string" and size <= 40:
            entry["value"] = (await redis.get(raw) or b"").decode(errors="replace")
        elif kind in {"set", "zset", "hash"} and size <= 5:
            if kind == "set":
                members = sorted(m.decode() for m in await redis.smembers(raw))
            elif kind == "zset":
                members = [m.decode() for m in await redis.zrange(raw, 0, -1)]
            else:
                members = sorted(f.decode() for f in await redis.hkeys(raw))
            entry["members"] = members
        found.append(entry)
    return sorted(found, key=lambda e: e["key"])


async def run(
    url: str, *, total: int, sample_every: int, backlog: int, chunk: int, concurrency: int
) -> dict[str, Any]:
    namespace = common.new_namespace("soak")
    keys = Keys(namespace)
    queue_key = keys.queue("default")
    redis = Redis.from_url(url)
    samples: list[dict[str, float]] = []
    proc = None
    try:
        proc = await common.start_cli_worker(
            redis_url=url, namespace=namespace, processes=1, concurrency=concurrency
        )
        await common.wait_registered(redis, namespace, 1, proc)
        pid = proc.pid
        started_rss = common.proc_status_kb(pid)
        common.note(f"worker pid {pid} registered, VmRSS {started_rss / 1024:.1f} MiB")
        began = time.perf_counter()
        enqueued = 0
        max_backlog = 0
        next_mark = sample_every

        async def feed(client: Client) -> None:
            nonlocal enqueued, max_backlog
            while enqueued < total:
                queued = int(await redis.llen(queue_key))
                if queued + chunk > backlog:
                    await asyncio.sleep(POLL)
                    continue
                size = min(chunk, total - enqueued)
                batch = [(i,) for i in range(enqueued, enqueued + size)]
                await client.enqueue_many(jobs.noop, batch)
                enqueued += size
                max_backlog = max(max_backlog, queued + size)  # an upper bound

        async with Client(Settings(redis_url=url, namespace=namespace)) as client:
            feeder = asyncio.create_task(feed(client))
            deadline = time.monotonic() + 600
            while True:
                if feeder.done() and feeder.exception():
                    raise RuntimeError(f"enqueueing failed: {feeder.exception()!r}")
                if proc.returncode is not None:
                    raise RuntimeError(f"the worker exited {proc.returncode} mid-run")
                done = int(await redis.get(keys.stats_processed) or 0)
                if done >= next_mark or done >= total:
                    info = await redis.info("memory")
                    sample = {
                        "processed": done,
                        "elapsed_s": time.perf_counter() - began,
                        "rss_kb": common.proc_status_kb(pid),
                        "hwm_kb": common.proc_status_kb(pid, "VmHWM"),
                        "redis_used_memory_kb": int(info["used_memory"]) // 1024,
                        "backlog": int(await redis.llen(queue_key)),
                    }
                    samples.append(sample)
                    common.note(
                        f"  {done:>9,} processed  {sample['elapsed_s']:6.1f} s  "
                        f"VmRSS {sample['rss_kb'] / 1024:6.1f} MiB  "
                        f"redis used_memory {sample['redis_used_memory_kb'] / 1024:6.1f} MiB"
                    )
                    while next_mark <= done:
                        next_mark += sample_every
                if done >= total:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {done:,} of {total:,} processed after 600 s")
                await asyncio.sleep(POLL)
            await feeder
        elapsed = time.perf_counter() - began
        failed = int(await redis.get(keys.stats_failed) or 0)
        await asyncio.sleep(IDLE_BEFORE_LISTING)
        idle_rss = common.proc_status_kb(pid)
        keys_idle = await key_report(redis, namespace)
        exit_code = await common.stop_cli_worker(proc)
        keys_after = await key_report(redis, namespace)
    finally:
        if proc is not None:
            await common.stop_cli_worker(proc)
        await common.cleanup(url, namespace)
        await redis.aclose()
    rss = [s["rss_kb"] for s in samples]
    first = rss[0]
    return {
        "jobs": total,
        "failed": failed,
        "elapsed_s": elapsed,
        "jobs_per_s": total / elapsed,
        "max_backlog": max_backlog,
        "rss_at_start_kb": started_rss,
        "rss_first_kb": first,
        "rss_last_kb": rss[-1],
        "rss_max_kb": max(rss),
        "rss_idle_after_kb": idle_rss,
        "drift": rss[-1] / first - 1,
        "max_deviation": max(abs(r / first - 1) for r in rss),
        "flat_within_10pct": all(abs(r / first - 1) <= 0.10 for r in rss),
        "samples": samples,
        "keys_while_idle": keys_idle,
        "worker_exit_code": exit_code,
        "keys_after_stop": keys_after,
    }


def _mib(kb: float) -> str:
    return f"{kb / 1024:.1f}"


def markdown(result: dict[str, Any]) -> str:
    out = [
        f"soak: {result['jobs']:,} no-op jobs, one worker process (c=50), "
        f"{result['elapsed_s']:.0f} s ({result['jobs_per_s']:,.0f} jobs/s), "
        f"backlog at most {result['max_backlog']:,}, failed {result['failed']}",
        "",
        "| processed | elapsed (s) | worker VmRSS (MiB) | VmHWM (MiB) | redis used_memory (MiB) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for s in result["samples"]:
        out.append(
            f"| {s['processed']:,} | {s['elapsed_s']:.1f} | {_mib(s['rss_kb'])} "
            f"| {_mib(s['hwm_kb'])} | {_mib(s['redis_used_memory_kb'])} |"
        )
    out += [
        "",
        f"VmRSS at start {_mib(result['rss_at_start_kb'])} MiB; after warm-up (first sample) "
        f"{_mib(result['rss_first_kb'])}, last {_mib(result['rss_last_kb'])}, "
        f"max {_mib(result['rss_max_kb'])} MiB; drift {result['drift']:+.1%}, "
        f"largest deviation {result['max_deviation']:.1%} "
        f"({'within' if result['flat_within_10pct'] else 'NOT within'} ±10%)",
    ]
    for title, entries in (
        ("Keys left while the worker idles", result["keys_while_idle"]),
        (f"Keys left after SIGTERM (exit {result['worker_exit_code']})", result["keys_after_stop"]),
    ):
        out += ["", title + ":", "", "| key | type | size | TTL (s) | value / members |"]
        out.append("|---|---|---:|---:|---|")
        for e in entries:
            shown = e.get("value", ", ".join(e.get("members", [])))
            ttl = "" if e["ttl_s"] is None else f"{e['ttl_s']:,.1f}"
            out.append(f"| `{e['key']}` | {e['type']} | {e['size']:,} | {ttl} | {shown[:80]} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async soak: RSS over 1M jobs")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--sample-every", type=int, default=100_000)
    parser.add_argument("--backlog", type=int, default=50_000, help="most jobs queued at once")
    parser.add_argument("--chunk", type=int, default=10_000, help="jobs per enqueue_many")
    parser.add_argument("--concurrency", type=int, default=50)
    common.add_common_args(parser, repeat=False, uvloop=False)
    args = parser.parse_args()
    if args.chunk > args.backlog:
        parser.error("--chunk must not exceed --backlog")
    sample_every = min(args.sample_every, args.jobs)
    load_before = common.machine()["loadavg_1m"]
    with common.redis_server(args.redis_url) as url:
        result = common.run_async(
            run(
                url,
                total=args.jobs,
                sample_every=sample_every,
                backlog=args.backlog,
                chunk=args.chunk,
                concurrency=args.concurrency,
            )
        )
    machine = common.machine()
    result["loadavg_1m_before"] = load_before
    table = markdown(result)
    common.note(f"1-min load average {load_before:.2f} before, {machine['loadavg_1m']:.2f} after")
    print(table, file=sys.stderr if args.json else sys.stdout, flush=True)
    if args.json:
        print(json.dumps({"machine": machine, "soak": result}, indent=2), flush=True)


if __name__ == "__main__":
    main()
