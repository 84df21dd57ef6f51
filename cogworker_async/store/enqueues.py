"""The enqueue scripts' wrappers: a job (or a chunk of jobs) onto its queue, a
scheduled job into the schedule, and ``enqueue_many``'s pipeline of them.

``enqueue.lua`` and ``schedule.lua`` are called here and only here (the unique
push is ``locks.enqueue_unique``); the client decides what to send and when.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.connection import is_cluster
from cogworker_async.store.locks import UniqueJob, enqueue_unique_args
from cogworker_async.store.scripts import EncodableArg, script


def queue_keys(keys: Keys, queue: str) -> list[str]:
    """``enqueue.lua``'s KEYS for ``queue``: the list, the known queues, its wakeup marker."""
    return [keys.queue(queue), keys.queues, keys.wakeup(queue)]


async def push(redis: Redis, keys: Keys, queue: str, encoded: Sequence[bytes]) -> None:
    """Push the encoded jobs onto ``queue``, in order, in one ``enqueue.lua`` call."""
    await script("enqueue").run(redis, queue_keys(keys, queue), [queue, *encoded])


async def schedule(redis: Redis, keys: Keys, pairs: Sequence[EncodableArg]) -> None:
    """Add (due, encoded job) pairs to the schedule in one ``schedule.lua`` call (the
    poller's wakeup too, when one is due first)."""
    await script("schedule").run(redis, [keys.schedule, keys.schedule_wakeup], pairs)


async def send_many(
    redis: Redis,
    keys: Keys,
    by_queue: Mapping[str, Sequence[bytes]],
    scheduled: Sequence[EncodableArg],
    unique_calls: Sequence[tuple[str, Sequence[UniqueJob]]],
    *,
    per_call: int,
) -> list[Any]:
    """One pipeline for one chunk of ``enqueue_many``: ``enqueue.lua`` per queue,
    ``schedule.lua`` for the (due, job) pairs, ``enqueue_unique.lua`` per call of
    ``unique_calls`` (in order, so of two items under one key the second is skipped),
    the first two taking at most ``per_call`` jobs a call. Returns the unique calls'
    replies, in order."""
    enqueue = script("enqueue")
    schedule_ = script("schedule")
    # A cluster pipeline refuses SCRIPT LOAD: it goes ahead, to every primary.
    locked = script("enqueue_unique")
    cluster = is_cluster(redis)
    if cluster:
        needed = [
            enqueue,
            *([schedule_] if scheduled else []),
            *([locked] if unique_calls else []),
        ]
        for loaded in needed:
            await redis.script_load(loaded.text)
    async with redis.pipeline(transaction=False) as pipe:
        # SCRIPT LOAD first makes the EVALSHAs behind it safe even right
        # after a SCRIPT FLUSH or a restart: no NOSCRIPT to recover from.
        if not cluster:
            pipe.script_load(enqueue.text)
        for queue, encoded in by_queue.items():
            each = queue_keys(keys, queue)
            # Chunks keep each script call's argument list reasonable.
            for start in range(0, len(encoded), per_call):
                chunk = encoded[start : start + per_call]
                pipe.evalsha(enqueue.sha, len(each), *each, queue, *chunk)
        if scheduled:
            schedule_keys = [keys.schedule, keys.schedule_wakeup]
            if not cluster:
                pipe.script_load(schedule_.text)
            for start in range(0, len(scheduled), 2 * per_call):
                pairs = scheduled[start : start + 2 * per_call]
                pipe.evalsha(schedule_.sha, 2, *schedule_keys, *pairs)
        if unique_calls and not cluster:
            pipe.script_load(locked.text)
        for queue, jobs in unique_calls:
            lock_keys, lock_args = enqueue_unique_args(keys, queue, jobs)
            pipe.evalsha(locked.sha, len(lock_keys), *lock_keys, *lock_args)
        replies = await pipe.execute()
    return list(replies[len(replies) - len(unique_calls) :])
