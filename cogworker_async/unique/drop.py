"""An operator's removal of jobs that will never run, with their locks.

Deleting a job from schedule, retry or dead, emptying one of those sets, or
clearing a queue is a terminal path: the locks the removed jobs hold (unique
locks, periodic running locks) are released (owner-checked) in the step that
removes them (``drop_jobs.lua``), so the next enqueue of the same job, or the
entry's next slot, is not refused by a lock whose job is gone.
"""

from __future__ import annotations

from typing import Literal

from redis.asyncio import Redis

from cogworker_async.store import locks

DROP_CHUNK = 1000  # jobs removed per drop_jobs.lua call (each call one atomic step)


async def drop_all(
    redis: Redis,
    key: str,
    *,
    kind: Literal["list", "zset"],
    kinds: bytes | str = "",
    tracking_prefix: str = "",
) -> int:
    """Remove every job of a sorted set or a queue list; returns how many.

    In chunks of ``DROP_CHUNK``, up to the size seen first: a job added
    meanwhile is not counted, and a queue's newer jobs (pushed at its head,
    while the oldest are popped from its tail) are left. A key of the wrong
    type raises ``WRONGTYPE`` before anything is removed.
    """
    size = int(await (redis.llen(key) if kind == "list" else redis.zcard(key)))
    removed = 0
    while removed < size:
        got = await locks.drop_jobs(
            redis,
            key,
            pop=min(DROP_CHUNK, size - removed),
            kind=kind,
            kinds=kinds,
            tracking_prefix=tracking_prefix,
        )
        if not got:
            break
        removed += got
    return removed
