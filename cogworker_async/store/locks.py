"""The wrappers of the lock scripts: a unique job's lock taken with its push,
owner-checked releases, an operator's drop of jobs with their locks, the
delete of an orphaned lock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script


async def release_lock(redis: Redis, key: str, token: str) -> bool:
    return bool(await script("release_lock").run(redis, [key], [token]))


async def release_locks(redis: Redis, locks: Sequence[tuple[str, str]]) -> int:
    """Release unique locks (key, jid), each owner-checked, in one call; how many went."""
    return int(
        await script("release_locks").run(
            redis, [key for key, _ in locks], [jid for _, jid in locks]
        )
    )


@dataclass(frozen=True, slots=True)
class UniqueEnqueue:
    """What ``enqueue_unique`` did: enqueued, or not because ``holder`` holds the lock."""

    enqueued: bool
    holder: str


@dataclass(frozen=True, slots=True)
class UniqueJob:
    """One unique job to enqueue: its lock, jid (the lock's value), TTL (s), payload, due."""

    lock: str
    jid: str
    ttl: float
    job: bytes
    due: float | None = None


def enqueue_unique_args(
    keys: Keys, queue: str, jobs: Sequence[UniqueJob]
) -> tuple[list[str], list[EncodableArg]]:
    """KEYS and ARGV of one ``enqueue_unique.lua`` call (a pipeline builds them too)."""
    script_keys = [
        keys.queue(queue),
        keys.queues,
        keys.wakeup(queue),
        keys.schedule,
        keys.schedule_wakeup,
        *(one.lock for one in jobs),
    ]
    args: list[EncodableArg] = [queue]
    for one in jobs:
        args.extend(
            (one.jid, max(1, int(one.ttl * 1000)), one.job, "" if one.due is None else one.due)
        )
    return script_keys, args


def unique_enqueue_replies(jobs: Sequence[UniqueJob], reply: Sequence[Any]) -> list[UniqueEnqueue]:
    holders = [text(holder) for holder in reply]
    return [
        UniqueEnqueue(holder == one.jid, holder) for one, holder in zip(jobs, holders, strict=True)
    ]


async def enqueue_unique(
    redis: Redis, keys: Keys, *, queue: str, jobs: Sequence[UniqueJob]
) -> list[UniqueEnqueue]:
    """For each job (in order), take its lock and push or schedule it, in one step."""
    script_keys, args = enqueue_unique_args(keys, queue, jobs)
    reply = await script("enqueue_unique").run(redis, script_keys, args)
    return unique_enqueue_replies(jobs, reply)


async def drop_jobs(
    redis: Redis,
    key: str,
    *,
    entries: Sequence[bytes] = (),
    pop: int = 0,
    kind: str = "zset",
    lock_prefix: str = "",
) -> int:
    """Remove jobs an operator deletes and release their locks in the same step.

    ``entries``: these exact sorted-set entries; else ``pop`` of them (a sorted
    set's lowest scores, or a list's oldest: ``kind="list"``). Unique locks are
    found from the payloads; periodic running locks too, given their
    ``lock_prefix`` (``keys.periodic_running_prefix``).
    """
    if entries:
        args: list[EncodableArg] = ["zrem", lock_prefix, *entries]
    else:
        args = ["rpop" if kind == "list" else "zpop", lock_prefix, pop]
    return int(await script("drop_jobs").run(redis, [key], args))


async def delete_orphan_lock(redis: Redis, keys: Keys, *, lock: str, holder: str) -> bool:
    """Delete ``lock`` if ``holder`` still holds it and its job is nowhere (one step)."""
    args: list[EncodableArg] = [
        holder,
        keys.queues,
        keys.queue_prefix,
        keys.in_progress_identities,
        keys.in_progress_prefix,
        keys.processes,
        keys.workers(""),
        keys.schedule,
        keys.retry,
        keys.unsettled,
        keys.repeat_orphans,
    ]
    return bool(await script("delete_orphan_lock").run(redis, [lock], args))
