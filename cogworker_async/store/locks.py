"""The wrappers of the lock scripts: a unique job's lock taken with its push,
owner-checked releases, an operator's drop of jobs with their locks, the
delete of an orphaned lock; and the plain lock calls beside them (a lease, the
releases a stopping worker hands over)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.guard import QUARANTINE_TTL
from cogworker_async.store.replies import loose_text
from cogworker_async.store.scripts import EncodableArg, script

log = logging.getLogger("cogworker_async.unique")


async def release_lock(redis: Redis, key: str, token: str) -> bool:
    return bool(await script("release_lock").run(redis, [key], [token]))


async def release_each(redis: Redis, held: Sequence[tuple[str, str]]) -> int:
    """Release each lock (key, jid), owner-checked (``release_lock.lua``, one pipeline);
    how many were released."""
    replies = await script("release_lock").run_many(redis, [([key], [jid]) for key, jid in held])
    return sum(int(r) for r in replies)


async def take_lease(redis: Redis, key: str, token: str, ms: int) -> bool:
    """``SET key token NX PX ms``: True when taken (no one held it), else False."""
    return bool(await redis.set(key, token, nx=True, px=ms))


async def hand_over_releases(redis: Redis, key: str, records: Sequence[bytes]) -> None:
    """Append releases for the next worker to make (``RPUSH``; ``take_handed_release``)."""
    await redis.rpush(key, *records)


async def take_handed_release(redis: Redis, key: str) -> bytes | None:
    """The oldest handed-over release, popped (``LPOP``: the caller's now), or None."""
    raw: bytes | None = await redis.lpop(key)  # type: ignore[assignment]
    return raw


async def release_locks(
    redis: Redis, locks: Sequence[tuple[str, str]], prefixes: Sequence[str]
) -> int:
    """Release holds (key, jid), each owner-checked and only under one of
    ``prefixes`` (the declared kinds' prefixes), in one call; how many went."""
    return int(
        await script("release_locks").run(
            redis, [key for key, _ in locks], [*(jid for _, jid in locks), *prefixes]
        )
    )


async def renew_unique(
    redis: Redis, renewals: Sequence[tuple[str, str, float]]
) -> list[str | None]:
    """Runs start: renew each (lock, jid, ttl s) for ``ttl`` from now, owner-checked
    (or take it, when free), in one call.

    Returns, per lock, the holder afterwards (``jid`` when renewed; another
    copy's jid is left alone), or None when the key is not a string."""
    args: list[EncodableArg] = []
    for _, jid, ttl in renewals:
        args.extend((jid, lock_ttl_ms(ttl)))
    reply = await script("renew_unique").run(redis, [key for key, _, _ in renewals], args)
    return [None if holder is None else loose_text(holder) for holder in reply]


@dataclass(frozen=True, slots=True)
class UniqueEnqueue:
    """What ``enqueue_unique`` did: enqueued, or not because ``holder`` holds the lock."""

    enqueued: bool
    holder: str


@dataclass(frozen=True, slots=True)
class UniqueJob:
    """One unique job to enqueue: its lock, jid (the lock's value), TTL (s), payload, due.

    The lock's TTL counts from when the job is due: a delayed job's lock lasts
    its delay plus ``ttl``, so no duplicate gets in before the first even ran."""

    lock: str
    jid: str
    ttl: float
    job: bytes
    due: float | None = None


def lock_ttl_ms(seconds: float) -> int:
    """A lock TTL as ``PX`` takes it: whole milliseconds, at least 1."""
    return max(1, int(seconds * 1000))


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
    args: list[EncodableArg] = [queue, keys.quarantine(""), QUARANTINE_TTL]
    now = time.time()
    for one in jobs:
        wait = 0.0 if one.due is None else max(0.0, one.due - now)
        args.extend(
            (one.jid, lock_ttl_ms(one.ttl + wait), one.job, "" if one.due is None else one.due)
        )
    return script_keys, args


def unique_enqueue_replies(jobs: Sequence[UniqueJob], reply: Sequence[Any]) -> list[UniqueEnqueue]:
    """The script's reply, per job; a wrong-typed lock key it moved to quarantine
    (before taking the lock) is logged, naming the key and where it went."""
    holders = [loose_text(holder) for holder in reply[: len(jobs)]]
    moved = reply[len(jobs) :]
    for at in range(0, len(moved) - 1, 2):
        log.error(
            "unique lock %s was not a string (not a lock): moved to %s (kept %d days "
            "for a human to look at); the job took a fresh lock",
            loose_text(moved[at]),
            loose_text(moved[at + 1]),
            QUARANTINE_TTL // 86400,
        )
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
    kinds: bytes | str = "",
    tracking_prefix: str = "",
) -> int:
    """Remove jobs an operator deletes and release what they hold in the same step.

    ``entries``: these exact sorted-set entries; else ``pop`` of them (a sorted
    set's lowest scores, or a list's oldest: ``kind="list"``). ``kinds``: the
    kinds of hold (``holds.kinds_table(keys)``; "" minds none): what each
    removed job's payload says it holds (a unique lock, a periodic running
    lock, ...) is settled as an operator's delete (released), owner-checked,
    each key only under its kind's prefix. With ``tracking_prefix``
    (``keys.tracking_prefix``; not for the dead set, whose jobs have ended) a
    tracked job's status says failed and its result waiters get ``JobFailed``
    (``JobDeleted``), in the same step.
    """
    head: list[EncodableArg] = [kinds, tracking_prefix, time.time()]
    if entries:
        args: list[EncodableArg] = ["zrem", *head, *entries]
    else:
        args = ["rpop" if kind == "list" else "zpop", *head, pop]
    return int(await script("drop_jobs").run(redis, [key], args))


async def delete_orphan_locks(redis: Redis, found: Sequence[tuple[str, bytes]]) -> list[bool]:
    """Delete each lock (key, holder) still held by the holder seen; per lock, deleted?
    The caller sends a bounded chunk per call."""
    if not found:
        return []
    reply = await script("delete_orphan_locks").run(
        redis, [key for key, _ in found], [holder for _, holder in found]
    )
    return [bool(int(one)) for one in reply]


async def drop_held(
    redis: Redis,
    key: str,
    *,
    queue: str,
    start: int,
    window: int,
    kinds: bytes | str = "",
    tracking_prefix: str = "",
) -> tuple[int, int]:
    """Remove the jobs of ``queue`` in the window ``[start, start + window)`` of a
    limit key's held jobs (``key``: ``<ns>:limits:~parked:<name>``), what they hold
    settled as by ``drop_jobs``; how many were removed and the next window's start
    (-1: the list ends)."""
    args: list[EncodableArg] = ["held", kinds, tracking_prefix, time.time(), queue, start, window]
    removed, next_start = await script("drop_jobs").run(redis, [key], args)
    return int(removed), int(next_start)
