"""`make demo`: a worker on examples/, a mixed batch of jobs, live progress, a summary.

Starts a throwaway redis-server unless COGWORKER_REDIS_URL is set, runs
`cogworker-async worker examples.tasks` as a subprocess, enqueues jobs
(including one that fails and one scheduled a few seconds ahead), shows
progress until everything settled, prints a summary and exits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cogworker_async import Client, Settings, api
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.tasks import flaky_report, ping, send_email, thumbnail  # noqa: E402

EMAILS = 3000
THUMBNAILS = 40


async def run(settings: Settings) -> int:
    keys = Keys(settings.namespace)
    env = dict(
        os.environ, COGWORKER_REDIS_URL=settings.redis_url, COGWORKER_NAMESPACE=settings.namespace
    )
    worker = subprocess.Popen(  # noqa: ASYNC220 - started once, before the event loop matters
        [
            sys.executable,
            "-m",
            "cogworker_async",
            "worker",
            "examples.tasks",
            "-c",
            "50",
            "--log-level",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        async with Client(settings) as client:
            await client.redis.delete(
                *(await client.redis.keys(f"{settings.namespace}:*") or ["-"])
            )
            started = time.perf_counter()
            await client.enqueue_many(
                send_email, [(f"user{i}@example.com", "hi") for i in range(EMAILS)]
            )
            await client.enqueue_many(thumbnail, [(f"/img/{i}.png",) for i in range(THUMBNAILS)])
            await client.enqueue(flaky_report, 7)
            await client.enqueue(ping.options(delay=3), "scheduled three seconds ahead")
            total = EMAILS + THUMBNAILS + 2
            print(
                f"enqueued {total} jobs ({EMAILS} emails, {THUMBNAILS} thumbnails, "
                "1 failing, 1 scheduled in 3 s)"
            )
            # The bulk part (emails and thumbnails) is timed on its own: the
            # whole run also waits for the job scheduled 3 s ahead, by design.
            bulk = EMAILS + THUMBNAILS
            bulk_took = None
            while bulk_took is None and time.perf_counter() - started < 30:
                processed = int(await client.redis.get(keys.stats_processed) or 0)
                if processed >= bulk:
                    bulk_took = time.perf_counter() - started
                await asyncio.sleep(0.01)
            deadline = time.monotonic() + 50
            while time.monotonic() < deadline:
                stats = await api.stats(client.redis, keys)
                backlog = sum(q.size for q in stats.queues)
                print(
                    f"  processed {stats.processed:>5}  failed {stats.failed}  "
                    f"queued {backlog:>5}  scheduled {stats.scheduled}  dead {stats.dead}",
                    flush=True,
                )
                if stats.processed >= total and stats.scheduled == 0:
                    break
                await asyncio.sleep(0.5)
            took = time.perf_counter() - started
            stats = await api.stats(client.redis, keys)
            dead = await client.redis.zrange(keys.dead, 0, -1)
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=30)
    print("\nsummary")
    print(f"  processed  {stats.processed}")
    print(f"  failed     {stats.failed} (in dead: {len(dead)})")
    if bulk_took is not None:
        print(
            f"  bulk       {bulk:,} jobs (emails, thumbnails) in {bulk_took:.2f} s from the first "
            f"enqueue: {bulk / bulk_took:,.0f} jobs/s (50 processors, 5 ms emails)"
        )
    print(f"  all done   {took:.2f} s (the scheduled job waits 3 s by design)")
    print(f"  worker exited with {code}")
    ok = stats.processed >= total and code == 0
    print("demo finished" if ok else "demo did NOT finish cleanly")
    return 0 if ok else 1


def main() -> int:
    url = os.environ.get("COGWORKER_REDIS_URL")
    if url:
        return asyncio.run(run(Settings(redis_url=url, namespace="cogworker-demo")))
    with EmbeddedRedis() as server:
        print(f"started a throwaway redis-server at {server.url}")
        return asyncio.run(run(Settings(redis_url=server.url, namespace="cogworker-demo")))


if __name__ == "__main__":
    raise SystemExit(main())
