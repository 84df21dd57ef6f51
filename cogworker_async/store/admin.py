"""Typed wrappers for the scripts behind operators' actions (the CLI, the web UI)."""

from __future__ import annotations

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.scripts import EncodableArg, script


async def enqueue_entry(
    redis: Redis, keys: Keys, *, source: str, entry: bytes, payload: bytes, queue: str
) -> bool:
    """Move ``entry`` of the sorted set ``source`` onto ``queue`` as ``payload``, now.

    False when the entry was already gone (someone else moved or deleted it).
    A queue key of the wrong type raises ``redis.ResponseError`` (WRONGTYPE)
    with nothing written. The job takes its lock again (unique, or an
    overlap=False periodic entry's running lock) when free or its own.
    """
    script_keys = [source, keys.queue(queue), keys.queues, keys.wakeup(queue)]
    args: list[EncodableArg] = [entry, payload, queue, keys.periodic_running_prefix]
    return bool(await script("enqueue_entry").run(redis, script_keys, args))


async def kill_entry(
    redis: Redis,
    keys: Keys,
    *,
    source: str,
    entry: bytes,
    dead_entry: bytes,
    now: float,
    dead_max_jobs: int,
    dead_timeout: float,
) -> bool:
    """Move ``entry`` of the sorted set ``source`` into the dead set as ``dead_entry``.

    The dead set is then trimmed to ``dead_max_jobs`` entries younger than
    ``dead_timeout``, as a failure filed there is. False when the entry was
    already gone (someone else moved or deleted it). The job's lock (unique, or
    an overlap=False periodic entry's running lock) is released in the same
    step, owner-checked.
    """
    args: list[EncodableArg] = [
        entry,
        dead_entry,
        now,
        dead_max_jobs,
        now - dead_timeout,
        keys.periodic_running_prefix,
    ]
    return bool(await script("kill_entry").run(redis, [source, keys.dead], args))
