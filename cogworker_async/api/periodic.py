"""Periodic entries, for the CLI and the web UI: what each entry is, when it runs
next, its last run and result, and running one now.

The entries are those the live workers published (``<ns>:periodic:entries``);
a worker that stops running an entry leaves its last published definition.
"""

from __future__ import annotations

from redis.asyncio import Redis

from cogworker_async.api.periodic_reads import (
    PeriodicInfo,
    UnreadQueueError,
    pause,
    periodic_list,
    resume,
    run_now,
)
from cogworker_async.keys import Keys


async def periodic_entries(redis: Redis, keys: Keys) -> list[PeriodicInfo]:
    """Every published entry: name, schedule, zone, next run (Redis's clock), last
    slot run, last result, and for an overlap=False entry the jid holding its lock."""
    return await periodic_list(redis, keys)


async def run_periodic_now(
    redis: Redis, keys: Keys, name: str, *, force: bool = False
) -> str | None:
    """Enqueue one run of entry ``name`` now (a fresh jid, the schedule unchanged);
    returns its jid, or None when no entry has that name. An unreadable definition
    is a ``ValueError`` naming the field; a queue no live process reads an
    ``UnreadQueueError`` (a ``ValueError``) naming it, unless ``force``."""
    return await run_now(redis, keys, name, force=force)


async def pause_periodic(redis: Redis, keys: Keys, name: str) -> bool | None:
    """Pause entry ``name`` at run time: every worker skips its slots (they are not
    kept for later) until ``resume_periodic``. True: paused now; False: it already
    was; None: no published entry has that name."""
    return await pause(redis, keys, name)


async def resume_periodic(redis: Redis, keys: Keys, name: str) -> bool | None:
    """Resume entry ``name``: its next slots run. True: resumed now; False: it was
    not paused; None: no such entry, paused or published."""
    return await resume(redis, keys, name)


__all__ = [
    "PeriodicInfo",
    "UnreadQueueError",
    "pause_periodic",
    "periodic_entries",
    "resume_periodic",
    "run_periodic_now",
]
