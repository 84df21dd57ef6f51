"""Fair keys' Redis side, for a human: the jobs waiting on each key's line of
a queue (``limits.fair``; ``lua_scripts/includes/fair.lua`` takes them by
turns). Read only in a namespace that has written a fair job
(``Keys.fair_used``): any other pays one EXISTS.

A line with jobs always has its key on its queue's ring (they change in one
script), so the ring lists every line to read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.replies import loose_text


@dataclass(frozen=True, slots=True)
class FairLine:
    """One fair key of a queue with jobs waiting: how many, and its weight."""

    queue: str
    key: str
    waiting: int
    weight: int


async def fair_lines(redis: Redis, keys: Keys, queues: Sequence[str]) -> list[FairLine]:
    """Every fair key with jobs waiting on ``queues``, in turn order (the next first)."""
    if not queues or not await redis.exists(keys.fair_used):
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.lrange(keys.fair_ring(queue), 0, -1)
            pipe.hgetall(keys.fair_base(queue))
        rings = await pipe.execute(raise_on_error=False)
    found: list[tuple[str, str, int]] = []
    for i, queue in enumerate(queues):
        ring, meta = rings[2 * i], rings[2 * i + 1]
        weights = (
            {loose_text(k): loose_text(v) for k, v in meta.items()}
            if isinstance(meta, dict)
            else {}
        )
        if isinstance(ring, list):
            for raw in reversed(ring):  # the tail's turn is now
                key = loose_text(raw)
                weight = weights.get(key, "1")
                found.append((queue, key, int(weight) if weight.isdigit() else 1))
    if not found:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for queue, key, _ in found:
            pipe.llen(keys.fair_jobs(queue, key))
        sizes = await pipe.execute(raise_on_error=False)
    return [
        FairLine(queue, key, size, weight)
        for (queue, key, weight), size in zip(found, sizes, strict=True)
        if isinstance(size, int) and size > 0
    ]


async def fair_waiting(redis: Redis, keys: Keys, queues: Sequence[str]) -> dict[str, int]:
    """The jobs waiting on the fair lines of each of ``queues`` (absent: none)."""
    waiting: dict[str, int] = {}
    for line in await fair_lines(redis, keys, queues):
        waiting[line.queue] = waiting.get(line.queue, 0) + line.waiting
    return waiting
