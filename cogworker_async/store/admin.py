"""Typed wrappers for the scripts behind operators' actions (the CLI, the web UI),
and the plain writes of the others (``api/`` decides, these write)."""

from __future__ import annotations

from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.keys import Keys
from cogworker_async.store.scripts import EncodableArg, script


async def set_paused(redis: Redis, keys: Keys, queue: str, *, paused: bool) -> None:
    """Add ``queue`` to the paused set, or take it out (raises what Redis says)."""
    if paused:
        await redis.sadd(keys.paused, queue)
    else:
        await redis.srem(keys.paused, queue)


async def wake(redis: Redis, keys: Keys, queue: str) -> None:
    """Set the queue's wakeup marker: idle workers blocked on it look at once."""
    await redis.zadd(keys.wakeup(queue), {"1": 0})


async def push_signal(redis: Redis, keys: Keys, identity: str, name: str, ttl: int) -> None:
    """Append ``name`` to process ``identity``'s signals, kept ``ttl`` s (one ``MULTI``)."""
    async with redis.pipeline(transaction=True) as pipe:
        pipe.rpush(keys.signals(identity), name)
        pipe.expire(keys.signals(identity), ttl)
        await pipe.execute()


async def delete_key(redis: Redis, key: str) -> bool:
    """Delete one key an operator named; True when it was there."""
    return bool(await redis.delete(key))


async def remove_queued(redis: Redis, key: str, raw: bytes) -> bool:
    """Remove one copy of the entry ``raw`` from the list ``key`` (``LREM``); True when
    it was there."""
    return bool(await redis.lrem(key, 1, raw))  # type: ignore[arg-type]  # bytes are fine


async def enqueue_entry(
    redis: Redis, keys: Keys, *, source: str, entry: bytes, payload: bytes, queue: str
) -> bool:
    """Move ``entry`` of the sorted set ``source`` onto ``queue`` as ``payload``, now.

    False when the entry was already gone (someone else moved or deleted it).
    A queue key of the wrong type raises ``redis.ResponseError`` (WRONGTYPE)
    with nothing written. What the job holds (its unique lock, an
    overlap=False periodic entry's running lock, ...) is settled as an
    operator's retry: taken again when free or its own.
    """
    script_keys = [source, keys.queue(queue), keys.queues, keys.wakeup(queue)]
    args: list[EncodableArg] = [
        entry,
        payload,
        queue,
        holds.kinds_table(keys),  # a payload's hold keys are written only under their prefix
    ]
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
    already gone (someone else moved or deleted it). What the job holds (its
    unique lock, an overlap=False periodic entry's running lock, ...) is
    released in the same step, owner-checked; a tracked job's status says dead and its result
    waiters get ``JobFailed`` (``JobKilled``, unless the dead entry names an error).
    """
    args: list[EncodableArg] = [
        entry,
        dead_entry,
        now,
        dead_max_jobs,
        now - dead_timeout,
        holds.kinds_table(keys),  # what it holds goes, each key only under its prefix
        keys.tracking_prefix,  # a tracked job's status and result waiters hear of it
    ]
    return bool(await script("kill_entry").run(redis, [source, keys.dead], args))
