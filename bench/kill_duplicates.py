"""At-least-once after a kill -9 at full speed: how many jobs run twice per kill.

A job that finished but whose ack had not reached Redis is still on its
process's in-progress list; when the process is SIGKILLed, recovery requeues
that list and the job runs again. This measures how many per kill.

Per kill, on a private Redis and a fresh namespace:

1. ``enqueue_many`` of ``--jobs`` ``bench.record`` jobs, argument 0..N-1. The
   job appends its argument and a newline to a file with one unbuffered
   ``os.write`` (O_APPEND): the line survives the SIGKILL an instant later.
2. The real worker command, ``python -m cogworker_async worker bench.jobs
   -c C``, with short liveness intervals (heartbeat 0.5 s, TTL 2 s, orphan
   threshold 3 s, check every 1 s) so recovery comes quickly.
3. Once ``<ns>:stats:processed`` (acks landed) passes a third of the jobs: SIGKILL.
   Read then, with the process dead so nothing moves: the acks landed, the
   lines written (runs so far) and the length of its in-progress list — every
   job it held, ran or finished unacknowledged: what can run again.
4. A second worker recovers the list and finishes the queue.
5. From the file: runs (lines), distinct arguments (must be N: nothing lost),
   duplicates = runs - distinct. ``runs at kill - acked at kill`` predicts them:
   the jobs finished whose ack had not landed.

    python bench/kill_duplicates.py [--jobs 300000] [--kills 5] [--concurrency 10]
                                    [--prefetch P] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
import jobs
from redis.asyncio import Redis

from cogworker_async import Client, Settings
from cogworker_async.keys import Keys

# Short liveness intervals: the second worker judges the killed one dead
# about 3.5 s after its last beat instead of 40 s (SPEC defaults).
LIVENESS_ENV = {
    "COGWORKER_HEARTBEAT_INTERVAL": "0.5",
    "COGWORKER_HEARTBEAT_TTL": "2",
    "COGWORKER_ORPHAN_THRESHOLD": "3.5",  # heartbeat_ttl + 2 x interval + 0.5 s
    "COGWORKER_ORPHAN_CHECK_INTERVAL": "1",
}
POLL = 0.005
ENQUEUE_CHUNK = 100_000  # enqueue_many builds one pipeline per call: keep each bounded


def count_runs(path: Path) -> tuple[int, int]:
    """(lines, distinct values) of the record file."""
    data = path.read_bytes().split()
    return len(data), len(set(data))


async def _get_int(redis: Redis, key: str) -> int:
    return int(await redis.get(key) or 0)


async def _wait_for_count(
    redis: Redis, key: str, target: int, proc: asyncio.subprocess.Process, limit: float
) -> None:
    deadline = time.monotonic() + limit
    while await _get_int(redis, key) < target:
        if proc.returncode is not None:
            raise RuntimeError(f"worker exited {proc.returncode} before {key} reached {target}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{key} below {target} after {limit:.0f} s")
        await asyncio.sleep(POLL)


async def one_kill(url: str, total: int, concurrency: int, workdir: Path) -> dict[str, Any]:
    namespace = common.new_namespace("kill")
    keys = Keys(namespace)
    record = workdir / f"{namespace}.runs"
    os.environ[jobs.RECORD_ENV] = str(record)  # inherited by the worker processes
    redis = Redis.from_url(url)
    first = second = None
    try:
        async with Client(Settings(redis_url=url, namespace=namespace)) as client:
            for start in range(0, total, ENQUEUE_CHUNK):
                stop = min(start + ENQUEUE_CHUNK, total)
                await client.enqueue_many(jobs.record, [(i,) for i in range(start, stop)])

        first = await common.start_cli_worker(
            redis_url=url, namespace=namespace, concurrency=concurrency
        )
        await common.wait_registered(redis, namespace, 1, first)
        (member,) = await redis.smembers(keys.processes)
        identity = member.decode() if isinstance(member, bytes) else member
        await _wait_for_count(redis, keys.stats_processed, total // 3, first, limit=120)
        first.kill()  # SIGKILL: no shutdown, no requeue, acks in flight lost
        await first.wait()
        killed_at = time.monotonic()
        # The process is dead and recovery has not started: these stand still.
        acked_at_kill = await _get_int(redis, keys.stats_processed)
        in_progress = int(await redis.llen(keys.in_progress(identity)))
        runs_at_kill, _ = count_runs(record)

        second = await common.start_cli_worker(
            redis_url=url, namespace=namespace, concurrency=concurrency
        )
        await _wait_for_count(redis, keys.stats_processed, total, second, limit=120)
        done_s = time.monotonic() - killed_at
        await common.stop_cli_worker(second)
        left = int(await redis.llen(keys.queue("default")))
    finally:
        for proc in (first, second):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
        await redis.aclose()
        await common.cleanup(url, namespace)
    runs, distinct = count_runs(record)
    record.unlink()
    return {
        "acked_at_kill": acked_at_kill,
        "runs_at_kill": runs_at_kill,
        "unacked_finished": runs_at_kill - acked_at_kill,
        "in_progress_at_kill": in_progress,
        "runs": runs,
        "distinct": distinct,
        "duplicates": runs - distinct,
        "lost": total - distinct,
        "left_queued": left,
        "kill_to_done_s": round(done_s, 2),
    }


def table(rows: list[dict[str, Any]]) -> str:
    cols = [
        ("kill", "kill"),
        ("acked_at_kill", "acked at kill"),
        ("runs_at_kill", "runs at kill"),
        ("unacked_finished", "finished, unacked"),
        ("in_progress_at_kill", "in-progress at kill"),
        ("duplicates", "duplicates"),
        ("lost", "lost"),
        ("kill_to_done_s", "kill→all done (s)"),
    ]
    lines = ["| " + " | ".join(label for _, label in cols) + " |"]
    lines.append("|" + "---:|" * len(cols))
    for n, row in enumerate(rows, 1):
        cells = [str(n) if key == "kill" else f"{row[key]:,}" for key, _ in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def run(args: argparse.Namespace, url: str) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="cogbench-kill-") as tmp:
        for k in range(args.kills):
            row = await one_kill(url, args.jobs, args.concurrency, Path(tmp))
            common.note(f"  kill {k + 1}/{args.kills}: {row}")
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_common_args(parser, repeat=False, uvloop=False)
    parser.add_argument("--jobs", type=int, default=300_000, help="jobs per kill")
    parser.add_argument("--kills", type=int, default=5, help="kill -9 runs")
    parser.add_argument("--concurrency", type=int, default=10, help="worker -c")
    parser.add_argument("--prefetch", type=int, help="COGWORKER_PREFETCH (default: c // 4)")
    args = parser.parse_args()
    os.environ.update(LIVENESS_ENV)
    if args.prefetch is not None:
        os.environ["COGWORKER_PREFETCH"] = str(args.prefetch)
    prefetch = Settings(concurrency=args.concurrency).effective_prefetch
    with common.redis_server(args.redis_url) as url:
        rows = common.run_async(run(args, url))

    dups = [row["duplicates"] for row in rows]
    lost = sum(row["lost"] for row in rows) + sum(row["left_queued"] for row in rows)
    summary = (
        f"kill -9 at full speed: duplicates per kill max {max(dups):,} "
        f"(mean {statistics.fmean(dups):,.0f}) over {len(rows)} kills; "
        f"in-progress at kill max {max(row['in_progress_at_kill'] for row in rows):,}; "
        f"{args.jobs:,} jobs each, {lost} lost "
        f"(concurrency {args.concurrency}, prefetch {prefetch})"
    )
    out = sys.stderr if args.json else sys.stdout
    print(table(rows), file=out)
    print(summary, file=out, flush=True)
    if args.json:
        document = {
            "machine": common.machine(),
            "params": {"jobs": args.jobs, "concurrency": args.concurrency, "prefetch": prefetch},
            "kills": rows,
            "summary": summary,
        }
        print(json.dumps(document, indent=2))
    if lost:
        raise SystemExit(f"{lost} job(s) lost")


if __name__ == "__main__":
    main()
