"""How long after a kill -9 a dead process's jobs start again, with the default settings.

Orphan recovery may only judge once the judge itself has beaten without a
break for ``orphan_threshold`` (40 s by default), and the dead process's last
beat must be that old too; passes come every ``orphan_check_interval`` (10 s,
jittered). This measures the whole bound from outside, with the real worker
command and no interval changed:

* ``standing``: a second worker has been running (and beating) for longer than
  ``orphan_threshold`` when the first is killed: recovery waits for the dead
  process's beat to age.
* ``fresh``: the only other worker starts right after the kill: it must first
  earn its own standing as a judge (the slowest case).

Per kill: five ``bench.hold`` jobs (each records its start with one unbuffered
write, then holds its slot) on worker A; SIGKILL A; the time until every one
of them has started again.

    python bench/recovery_time.py [--cases standing,fresh] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import common
import jobs
from redis.asyncio import Redis

from cogworker_async import Client, Settings

JOBS = 5
HOLD_SECONDS = 600.0  # longer than any recovery: a second start can only be a recovery


def starts(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


async def wait_until(condition: Any, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not await condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not reached within {limit:.0f} s")
        await asyncio.sleep(0.05)


async def one_case(url: str, case: str, workdir: Path) -> dict[str, Any]:
    namespace = common.new_namespace("recov")
    record = workdir / f"{namespace}.starts"
    os.environ[jobs.RECORD_ENV] = str(record)
    threshold = Settings().orphan_threshold
    redis = Redis.from_url(url)
    procs: list[asyncio.subprocess.Process] = []
    try:
        victim = await common.start_cli_worker(redis_url=url, namespace=namespace, concurrency=JOBS)
        procs.append(victim)
        await common.wait_registered(redis, namespace, 1, victim)
        async with Client(Settings(redis_url=url, namespace=namespace)) as client:
            await client.enqueue_many(jobs.hold, [(i, HOLD_SECONDS) for i in range(JOBS)])

        async def all_started() -> bool:
            return starts(record) >= JOBS

        await wait_until(all_started, 30)  # all on the victim: it alone was there
        if case == "standing":
            standing = await common.start_cli_worker(
                redis_url=url, namespace=namespace, concurrency=JOBS
            )
            procs.append(standing)
            await common.wait_registered(redis, namespace, 2, standing)
            await asyncio.sleep(threshold + 1)  # it has been beating longer than the threshold
        victim.kill()
        await victim.wait()
        killed_at = time.monotonic()
        if case == "fresh":
            fresh = await common.start_cli_worker(
                redis_url=url, namespace=namespace, concurrency=JOBS
            )
            procs.append(fresh)

        async def all_restarted() -> bool:
            return starts(record) >= 2 * JOBS

        await wait_until(all_restarted, 4 * threshold + 60)
        took = time.monotonic() - killed_at
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await redis.aclose()
        await common.cleanup(url, namespace)
        record.unlink(missing_ok=True)
    return {"case": case, "kill_to_restart_s": round(took, 1)}


async def run(args: argparse.Namespace, url: str) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="cogbench-recovery-") as tmp:
        return [await one_case(url, case, Path(tmp)) for case in args.cases.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="standing,fresh")
    common.add_common_args(parser, repeat=False, uvloop=False)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        rows = common.run_async(run(args, url))
    if args.json:
        print(json.dumps(rows))
        return
    defaults = Settings()
    print(
        f"defaults: heartbeat {defaults.heartbeat_interval:g} s, ttl {defaults.heartbeat_ttl:g} s,"
        f" orphan_threshold {defaults.orphan_threshold:g} s,"
        f" orphan_check_interval {defaults.orphan_check_interval:g} s"
    )
    for row in rows:
        print(f"kill -9 -> every job started again ({row['case']}): {row['kill_to_restart_s']} s")


if __name__ == "__main__":
    main()
