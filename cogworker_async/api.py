"""Read and admin views over the wire contract: queues, sets, processes, stats.

The CLI and the web UI are thin layers over these functions.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True, slots=True)
class QueueInfo:
    name: str
    size: int
    latency: float
    paused: bool


@dataclass(frozen=True, slots=True)
class Stats:
    processed: int
    failed: int
    queues: list[QueueInfo]
    scheduled: int
    retry: int
    dead: int
    processes: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _int(value: bytes | str | None) -> int:
    # A corrupt counter reads as 0 here rather than breaking every stats call.
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _latency(oldest: bytes | None, now: float) -> float:
    """Seconds the oldest job (the one popped next) has waited."""
    if oldest is None:
        return 0.0
    try:
        job = orjson.loads(oldest)
        enqueued = float(job.get("enqueued_at") or job.get("created_at"))
    except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
        return 0.0
    return max(0.0, now - enqueued)


async def queue_names(redis: Redis, keys: Keys) -> list[str]:
    return sorted(_text(n) for n in await redis.smembers(keys.queues))


async def queues(redis: Redis, keys: Keys) -> list[QueueInfo]:
    names = await queue_names(redis, keys)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.smembers(keys.paused)
        for name in names:
            pipe.llen(keys.queue(name))
            pipe.lindex(keys.queue(name), -1)
        replies = await pipe.execute(raise_on_error=False)
    paused_reply = replies[0]
    paused = {_text(p) for p in paused_reply} if isinstance(paused_reply, set) else set()
    now = time.time()
    result = []
    for index, name in enumerate(names):
        size, oldest = replies[1 + 2 * index], replies[2 + 2 * index]
        result.append(
            QueueInfo(
                name=name,
                size=size if isinstance(size, int) else 0,
                latency=_latency(oldest if isinstance(oldest, bytes) else None, now),
                paused=name in paused,
            )
        )
    return result


async def stats(redis: Redis, keys: Keys) -> Stats:
    async with redis.pipeline(transaction=False) as pipe:
        pipe.get(keys.stats_processed)
        pipe.get(keys.stats_failed)
        pipe.zcard(keys.schedule)
        pipe.zcard(keys.retry)
        pipe.zcard(keys.dead)
        pipe.smembers(keys.processes)
        replies = await pipe.execute(raise_on_error=False)
    processed, failed, scheduled, retry, dead, identities = (
        r if not isinstance(r, Exception) else None for r in replies
    )
    live = 0
    if identities:
        async with redis.pipeline(transaction=False) as pipe:
            for identity in identities:
                pipe.exists(keys.process(_text(identity)))
            live = sum(1 for r in await pipe.execute() if r)
    return Stats(
        processed=_int(processed),
        failed=_int(failed),
        queues=await queues(redis, keys),
        scheduled=scheduled or 0,
        retry=retry or 0,
        dead=dead or 0,
        processes=live,
    )


async def pause(redis: Redis, keys: Keys, queue: str) -> None:
    await redis.sadd(keys.paused, queue)


async def resume(redis: Redis, keys: Keys, queue: str) -> None:
    await redis.srem(keys.paused, queue)
    # Wake idle workers blocked on the marker so the queue's backlog starts at once.
    await redis.zadd(keys.wakeup(queue), {"1": 0})
