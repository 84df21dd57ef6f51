"""``locks delete-orphaned`` and the web Locks page at scale: 100k unique locks and
100k jobs (queued, retrying, scheduled, in progress), a fifth of the locks orphaned.

Measures the wall time of ``api.delete_orphaned`` and of one Locks page read
(``api.list_locks_page``), and the longest single Redis call meanwhile: the
server's SLOWLOG, with its threshold set to ``--slow-ms`` (50 ms) for the run,
must stay empty. (Before: one script per lock scanning every job, ~1.5 s of
blocked Redis per lock at this size; the page read every lock, 3.0 s.)

    python bench/orphan_locks.py [--locks 100000] [--jobs 100000] [--json]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import common
import orjson
from redis.asyncio import Redis

from cogworker_async import api
from cogworker_async.keys import Keys
from cogworker_async.payload import new_jid

LOAD_CHUNK = 2000


async def _seed(redis: Redis, keys: Keys, locks: int, jobs: int) -> set[str]:
    """``jobs`` jobs spread over the places jobs wait; ``locks`` locks, 4/5 of them
    held by those jobs. Returns the orphans' holders."""
    jids = [new_jid() for _ in range(jobs)]
    queued, retrying, scheduled, running = (
        jids[: jobs // 2],
        jids[jobs // 2 : jobs * 3 // 4],
        jids[jobs * 3 // 4 : jobs * 19 // 20],
        jids[jobs * 19 // 20 :],
    )

    def raw(jid: str) -> bytes:
        return orjson.dumps(
            {"jid": jid, "class": "bench.job", "queue": "mail", "args": [jid[:6]], "kwargs": {}}
        )

    await redis.sadd(keys.queues, "mail")
    await redis.sadd(keys.in_progress_identities, "bench:1:x")
    for start in range(0, jobs, LOAD_CHUNK):
        async with redis.pipeline(transaction=False) as pipe:
            for jid in queued[start : start + LOAD_CHUNK]:
                pipe.lpush(keys.queue("mail"), raw(jid))
            for jid in retrying[start : start + LOAD_CHUNK]:
                pipe.zadd(keys.retry, {raw(jid): time.time() + 3600})
            for jid in scheduled[start : start + LOAD_CHUNK]:
                pipe.zadd(keys.schedule, {raw(jid): time.time() + 3600})
            for jid in running[start : start + LOAD_CHUNK]:
                pipe.lpush(keys.in_progress("bench:1:x"), raw(jid))
            await pipe.execute()
    live = min(locks * 4 // 5, jobs)
    holders = jids[:: max(1, jobs // live)][:live]
    orphans = [new_jid() for _ in range(locks - len(holders))]
    all_holders = [*holders, *orphans]
    for start in range(0, len(all_holders), LOAD_CHUNK):
        async with redis.pipeline(transaction=False) as pipe:
            for holder in all_holders[start : start + LOAD_CHUNK]:
                pipe.set(keys.unique(f"bench.job:{holder}"), holder, ex=86400)
            await pipe.execute()
    return set(orphans)


async def bench(url: str, locks: int, jobs: int, slow_ms: float) -> list[dict[str, Any]]:
    namespace = common.new_namespace("orphans")
    keys = Keys(namespace)
    redis = Redis.from_url(url)
    old_threshold = (await redis.config_get("slowlog-log-slower-than"))["slowlog-log-slower-than"]
    try:
        common.note(f"seeding {locks} locks and {jobs} jobs ...")
        orphans = await _seed(redis, keys, locks, jobs)
        await redis.config_set("slowlog-log-slower-than", int(slow_ms * 1000))
        await redis.slowlog_reset()
        started = time.perf_counter()
        page = await api.list_locks_page(redis, keys)
        page_s = time.perf_counter() - started
        started = time.perf_counter()
        deleted = await api.delete_orphaned(redis, keys)
        delete_s = time.perf_counter() - started
        slow = await redis.slowlog_get(128)
        found = {lock.holder for lock in deleted}
        if found != orphans:
            raise RuntimeError(f"deleted {len(found)} locks, expected the {len(orphans)} orphans")
        longest = max((entry["duration"] for entry in slow), default=0) / 1000
        return [
            {"metric": "delete-orphaned", "value": round(delete_s, 2), "unit": "s"},
            {"metric": "orphans deleted", "value": len(deleted), "unit": "locks"},
            {"metric": "Locks page read", "value": round(page_s * 1000, 1), "unit": "ms"},
            {"metric": "locks on the page", "value": len(page.locks), "unit": "locks"},
            {"metric": f"Redis calls over {slow_ms:g} ms", "value": len(slow), "unit": "calls"},
            {"metric": "longest of those", "value": longest, "unit": "ms"},
        ]
    finally:
        await redis.config_set("slowlog-log-slower-than", old_threshold)
        await redis.aclose()
        await common.cleanup(url, namespace)


def main() -> None:
    parser = argparse.ArgumentParser(description="cogworker_async: orphaned-lock delete at scale")
    common.add_common_args(parser, repeat=False, uvloop=False)
    parser.add_argument("--locks", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--slow-ms", type=float, default=50.0)
    args = parser.parse_args()
    with common.redis_server(args.redis_url) as url:
        rows = common.run_async(bench(url, args.locks, args.jobs, args.slow_ms))
    if args.json:
        print(orjson.dumps(rows).decode())
    for row in rows:
        common.note(f"{row['metric']:>28}: {row['value']} {row['unit']}")


if __name__ == "__main__":
    main()
