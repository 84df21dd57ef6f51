"""A limited job's own Redis cost in the fetch script (issue 23 §8): 20,000 jobs
fetched 50 a call and each batch acked with the next call (its limit slots
released in that step), on a redis-server of your own (``INFO commandstats``:
the usec of every EVAL/EVALSHA and each command the scripts ran, per job).

Modes: ``plain`` (no limit), ``key`` (one concurrency limit of 50 per key,
``acct:{i % 1000}``: never full), ``global`` (one concurrency limit "g" of
1,000: never full). Run it against two trees, alternating, on the same server
(it flushes the database it is given)::

    cd /tmp; PYTHONPATH=<tree> <tree>/.venv/bin/python <tree>/bench/limit_cost.py \
        redis://127.0.0.1:6412/15 key

Prints the Redis µs per job of the scripts, then (``-v``) each command's
calls and µs per job.
"""

from __future__ import annotations

import asyncio
import sys
import time

import orjson
from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async import payload as payloads
from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import Ack

slots_only = getattr(holds, "slots_only", None)
JOBS = 20_000
WANT = 50


def payload(i: int, mode: str, now: float) -> dict[str, object]:
    job: dict[str, object] = {
        "jid": f"{i:024x}",
        "class": "bench.noop",
        "args": [i],
        "queue": "default",
        "created_at": now,
        "enqueued_at": now,
    }
    if mode == "key":
        key = f"acct:{i % 1000}"
        job["limits"] = [["concurrency", key, 50]]
        job["limit_slots"] = [key]
    elif mode == "global":
        job["limits"] = [["concurrency", "g", 1000]]
        job["limit_slots"] = ["g"]
    return job


async def main(url: str, mode: str, verbose: bool, keep_slots: bool) -> None:
    redis = Redis.from_url(url)
    keys = Keys("limit-cost")
    await redis.flushdb()
    now = time.time()
    decoded = [payload(i, mode, now) for i in range(JOBS)]
    raw = [payloads.encode_job(job) for job in decoded]  # as enqueue writes them
    for i in range(0, JOBS, 1000):
        await redis.lpush(keys.queue("default"), *raw[i : i + 1000])
    if mode != "plain":
        await redis.set(keys.limits_used, 1)
    await redis.config_resetstat()
    acks: list[Ack] = []
    done = 0
    while True:
        got = await commands.fetch(
            redis, keys, identity="me", queues=["default"], want=WANT, acks=acks, reliable=True
        )
        acks = []
        for job in got.jobs:
            body = orjson.loads(job)
            # As the worker acks it: its slots by name where the tree can
            # (``holds.slots_only``), else its holds read.
            slots = slots_only(body) if slots_only is not None else None
            if keep_slots:  # ``--keep``: the fetch's share alone (no slot released)
                acks.append(Ack(job, body["jid"]))
            elif slots is not None:
                acks.append(Ack(job, body["jid"], slots=slots))  # type: ignore[call-arg, unused-ignore]
            else:
                acks.append(Ack(job, body["jid"], holds=holds.read(body, keys)))
        done += len(got.jobs)
        if not got.jobs:
            break
    stats = await redis.info("commandstats")
    usec = sum(v["usec"] for name, v in stats.items() if "eval" in name)
    print(f"{usec / done:.3f}")
    if verbose:
        for name, v in sorted(stats.items(), key=lambda kv: -kv[1]["usec"]):
            print(f"  {name:24} calls/job {v['calls'] / done:6.3f}  µs/job {v['usec'] / done:6.3f}")
    left = [k async for k in redis.scan_iter(f"{keys.limits_prefix}*")]
    slots = [k for k in left if b"~" not in k]
    assert keep_slots or not slots, f"slots left: {slots[:5]}"
    await redis.aclose()


if __name__ == "__main__":
    mode = sys.argv[2] if len(sys.argv) > 2 else "key"
    asyncio.run(main(sys.argv[1], mode, "-v" in sys.argv, "--keep" in sys.argv))
