"""Small helpers shared by the Lua script tests."""

from __future__ import annotations

import time
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.payload import new_jid
from cogworker_async.store import admin
from cogworker_async.store.scripts import script


def make_job(queue: str = "default", jid: str | None = None, **extra: Any) -> bytes:
    """A job payload as a producer would push it."""
    body: dict[str, Any] = {
        "jid": jid or new_jid(),
        "class": "tests.job",
        "args": [],
        "queue": queue,
        "created_at": 1.0,
        "enqueued_at": 1.0,
    }
    body.update(extra)
    return orjson.dumps(body)


def make_suspect(queue: str = "default", **extra: Any) -> bytes:
    """A job as requeue.lua puts back a dead process's job: marked as a suspect."""
    return b'{"suspect":1,' + make_job(queue, **extra)[1:]


def jid_of(raw: bytes) -> str:
    jid = orjson.loads(raw)["jid"]
    assert isinstance(jid, str)
    return jid


async def enqueue(redis: Redis, keys: Keys, queue: str, *payloads: bytes) -> int:
    """Push through enqueue.lua, oldest first (the first payload runs first)."""
    length = await script("enqueue").run(
        redis, [keys.queue(queue), keys.queues, keys.wakeup(queue)], [queue, *payloads]
    )
    return int(length)


async def redis_now(redis: Redis) -> float:
    seconds, micros = await redis.time()
    return float(seconds) + micros / 1_000_000


async def drain(redis: Redis, key: str) -> list[bytes]:
    """RPOP everything: the order workers would take the jobs in."""
    popped: list[bytes] = []
    while (item := await redis.rpop(key)) is not None:
        assert isinstance(item, bytes)
        popped.append(item)
    return popped


JUDGE = "judge:1:fff"
JUDGE_TTL = 20.0


async def trust_judge(redis: Redis, keys: Keys, *, now: float | None = None) -> str:
    """Make JUDGE a process whose view recovery trusts: a fresh beat at the end of
    an unbroken run of beats far longer than any threshold a test uses."""
    now = await redis_now(redis) if now is None else now
    await redis.hset(keys.last_beat, JUDGE, f"{now:.6f}")
    await redis.hset(keys.beating_since, JUDGE, f"{now - 10_000:.6f}")
    return JUDGE


async def kill_from_retry(redis: Redis, keys: Keys, raw: bytes) -> bool:
    """An operator's kill of ``raw`` (put in the retry set first): into dead as is."""
    await redis.zadd(keys.retry, {raw: 1.0})
    return await admin.kill_entry(
        redis,
        keys,
        source=keys.retry,
        entry=raw,
        dead_entry=raw,
        now=time.time(),
        dead_max_jobs=100,
        dead_timeout=3600,
    )
