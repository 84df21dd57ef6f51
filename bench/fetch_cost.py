"""The fetch script's own Redis cost per plain job: 20,000 plain jobs fetched 50 a
call and each batch acked with the next call, on a redis-server of your own
(``INFO commandstats``: the usec of every EVAL/EVALSHA, per job).

Run it against two trees, alternating, on the same server (it flushes the
database it is given)::

    cd /tmp; PYTHONPATH=<tree> <tree>/.venv/bin/python <tree>/bench/fetch_cost.py redis://127.0.0.1:6412/15

Prints one number: Redis µs per job.
"""

from __future__ import annotations

import asyncio
import sys
import time

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import Ack

JOBS = 20_000
WANT = 50


async def main(url: str) -> None:
    redis = Redis.from_url(url)
    keys = Keys("fetch-cost")
    await redis.flushdb()
    now = time.time()
    jobs = [
        orjson.dumps(
            {
                "jid": f"{i:024x}",
                "class": "bench.noop",
                "args": [i],
                "queue": "default",
                "created_at": now,
                "enqueued_at": now,
            }
        )
        for i in range(JOBS)
    ]
    for i in range(0, JOBS, 1000):
        await redis.lpush(keys.queue("default"), *jobs[i : i + 1000])
    await redis.config_resetstat()
    acks: list[Ack] = []
    done = 0
    while True:
        got = await commands.fetch(
            redis, keys, identity="me", queues=["default"], want=WANT, acks=acks, reliable=True
        )
        acks = [Ack(job, "") for job in got.jobs]
        done += len(got.jobs)
        if not got.jobs:
            break
    stats = await redis.info("commandstats")
    usec = sum(v["usec"] for name, v in stats.items() if "eval" in name)
    print(f"{usec / done:.3f}")
    await redis.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
