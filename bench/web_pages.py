"""Server time of every web UI page with big sets: 100,000 entries each in retry, dead
and schedule, 100 processes (each running a job), a queue of 100,000 jobs.

Each page is requested through the ASGI app in-process (httpx's ASGITransport,
no socket between client and app), so what is timed is the app's own work:
its Redis calls and the rendering. ``--rounds`` requests per page; the table
shows the median and the slowest, and the median of the app's own
``Server-Timing`` (from the first byte of the request to its answer's headers).

    python bench/web_pages.py [--entries 100000] [--processes 100] [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
from redis.asyncio import Redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.web import create_app

BUDGET_MS = 200.0


def job(i: int, name: str, queue: str = "default", **extra: Any) -> bytes:
    body = {
        "jid": f"{i:024x}",
        "class": name,
        "args": [i, f"user{i}@example.com"],
        "queue": queue,
        "created_at": 1.7e9 + i,
        "enqueued_at": 1.7e9 + i,
        "error_class": "RuntimeError",
        "error_message": f"failure number {i}",
        "retry_count": i % 25,
        **extra,
    }
    return orjson.dumps(body)


async def fill(redis: Redis, keys: Keys, entries: int, processes: int) -> None:
    names = ("emails.send", "reports.build", "billing.charge", "search.reindex")
    for key in (keys.retry, keys.dead, keys.schedule):
        for start in range(0, entries, 10_000):
            batch = {
                job(i, names[i % 4]): 1.7e9 + i for i in range(start, min(entries, start + 10_000))
            }
            await redis.zadd(key, batch)
    for start in range(0, entries, 10_000):
        await redis.lpush(
            keys.queue("default"),
            *(job(i, "emails.send") for i in range(start, min(entries, start + 10_000))),
        )
    await redis.sadd(keys.queues, "default", "mail", "reports")
    async with redis.pipeline(transaction=False) as pipe:
        for p in range(processes):
            identity = f"host{p}:{1000 + p}:{uuid.uuid4().hex[:8]}"
            info = {
                "hostname": f"host{p}",
                "pid": 1000 + p,
                "queues": ["default", "mail"],
                "concurrency": 10,
                "busy": 1,
                "started_at": time.time() - 3600,
                "rss": 50_000_000,
                "quiet": False,
            }
            pipe.sadd(keys.processes, identity)
            pipe.set(keys.process(identity), orjson.dumps(info), ex=3600)
            pipe.hset(keys.last_beat, identity, time.time())
            work = {"queue": "default", "run_at": time.time(), "payload": job(p, "x").decode()}
            pipe.hset(keys.workers(identity), "0", orjson.dumps(work))
        await pipe.execute()


PAGES = [
    "/",
    "/stats.json",
    "/busy",
    "/queues",
    "/queues/default",
    "/queues/default?order=oldest&page=1000",
    "/retries",
    "/retries?page=1500",
    "/dead",
    "/dead?page=1999",
    "/scheduled",
    "/dead?q=billing",
    "/dead?q=user99999@",
    "/retries?q=no+such+text+anywhere",
    "/periodic",
    "/quarantine",
]


async def measure(url: str, entries: int, processes: int, rounds: int) -> list[dict[str, Any]]:
    settings = Settings(redis_url=url, namespace=f"webbench{uuid.uuid4().hex[:6]}")
    keys = Keys(settings.namespace)
    redis = Redis.from_url(url)
    try:
        started = time.perf_counter()
        await fill(redis, keys, entries, processes)
        print(f"filled in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        dead = await redis.zrange(keys.dead, 0, 0, withscores=True)
        raw, score = dead[0]
        PAGES.append(f"/dead/entry?ref={score!r}~{orjson.loads(raw)['jid']}")
        app = create_app(settings)
        transport = httpx.ASGITransport(app=app)
        rows = []
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            for path in PAGES:
                times, app_times = [], []
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    answer = await client.get(path)
                    times.append((time.perf_counter() - t0) * 1000)
                    assert answer.status_code == 200, (path, answer.status_code)
                    app_times.append(float(answer.headers["server-timing"].split("dur=")[1]))
                rows.append(
                    {
                        "page": path,
                        "median_ms": statistics.median(times),
                        "max_ms": max(times),
                        "app_median_ms": statistics.median(app_times),
                        "bytes": len(answer.content),
                    }
                )
        return rows
    finally:
        await redis.flushdb()
        await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--redis-url", help="use this Redis (its db is flushed afterwards)")
    args = parser.parse_args()
    server = None
    url = args.redis_url
    if url is None:
        server = EmbeddedRedis()
        server.start()
        url = server.url
    try:
        rows = asyncio.run(measure(url, args.entries, args.processes, args.rounds))
    finally:
        if server is not None:
            server.stop()
    print(
        "| page | median ms | slowest ms | Server-Timing median | bytes "
        f"| under {BUDGET_MS:.0f} ms |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        ok = "yes" if row["max_ms"] < BUDGET_MS else "**no**"
        print(
            f"| `{row['page']}` | {row['median_ms']:.1f} | {row['max_ms']:.1f} | "
            f"{row['app_median_ms']:.1f} | "
            f"{row['bytes']:,} | {ok} |"
        )


if __name__ == "__main__":
    main()
