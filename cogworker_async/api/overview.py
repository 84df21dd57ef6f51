"""Queues and totals: queue sizes and latency, stats and the recovery
counters, and pausing, resuming and clearing a queue.

A counter or queue head that can't be read counts as zero rather than failing
the whole overview; a key of the wrong type is named in a warning.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async import holds
from cogworker_async.api._common import _is_wrong_type, _set_members, _warn_wrong_type
from cogworker_async.api.limits import clear_held_of_queue
from cogworker_async.api.running import processes
from cogworker_async.keys import Keys
from cogworker_async.settings import check_queue_name
from cogworker_async.store import admin
from cogworker_async.store.fair import fair_lines, fair_waiting
from cogworker_async.store.replies import text as _text
from cogworker_async.unique.drop import drop_all


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
    recovery: dict[str, int]
    """Orphan recovery: ``recovered`` (jobs requeued from dead processes),
    ``parked`` (waiting in repeat_orphans), ``process_died`` (buried as
    ProcessDied), ``duplicates_suspected`` (acks that found their job already
    requeued: it may have run twice)."""
    aborted: int = 0
    """Jobs aborted (removed before they ran, or cancelled while running)."""

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
    return await _set_members(redis, keys.queues, "no queue listed")


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
    fair = await fair_waiting(redis, keys, names)  # limits.fair's lines count as waiting
    now = time.time()
    result = []
    for index, name in enumerate(names):
        size, oldest = replies[1 + 2 * index], replies[2 + 2 * index]
        result.append(
            QueueInfo(
                name=name,
                size=(size if isinstance(size, int) else 0) + fair.get(name, 0),
                latency=_latency(oldest if isinstance(oldest, bytes) else None, now),
                paused=name in paused,
            )
        )
    return result


RECOVERY_COUNTERS = ("recovered", "process_died", "duplicates_suspected")


async def stats(redis: Redis, keys: Keys) -> Stats:
    async with redis.pipeline(transaction=False) as pipe:
        pipe.get(keys.stats_processed)
        pipe.get(keys.stats_failed)
        pipe.zcard(keys.schedule)
        pipe.zcard(keys.retry)
        pipe.zcard(keys.dead)
        pipe.smembers(keys.processes)
        pipe.llen(keys.repeat_orphans)
        pipe.get(keys.stat("aborted"))
        for name in RECOVERY_COUNTERS:
            pipe.get(keys.stat(name))
        replies = await pipe.execute(raise_on_error=False)
    processed, failed, scheduled, retry, dead, identities, parked, aborted, *counters = (
        r if not isinstance(r, Exception) else None for r in replies
    )
    recovery = {name: _int(value) for name, value in zip(RECOVERY_COUNTERS, counters, strict=True)}
    recovery["parked"] = parked or 0
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
        recovery=recovery,
        aborted=_int(aborted),
    )


class UnknownQueueError(ValueError):
    """A queue named by an admin action that nothing knows: most likely a typo."""


async def _known(redis: Redis, keys: Keys, queue: str) -> bool:
    """Whether ``queue`` is listed in ``<ns>:queues`` or read by a live process."""
    if queue in await queue_names(redis, keys):
        return True
    return any(p.alive and queue in (p.queues or []) for p in await processes(redis, keys))


async def _check_target(redis: Redis, keys: Keys, queue: str, verb: str, force: bool) -> None:
    check_queue_name(queue)
    if not force and not await _known(redis, keys, queue):
        raise UnknownQueueError(
            f"no queue {queue!r}: it is not in {keys.queues} and no live process reads it "
            f"(a typo?); {verb} it anyway with --force (force=True)"
        )


async def pause(redis: Redis, keys: Keys, queue: str, *, force: bool = False) -> bool:
    """Stop workers fetching from ``queue``; False (and a warning) if that can't be recorded.

    A name no worker could read is a ``ValueError``; a queue nothing knows
    (not listed, not read by a live process) an ``UnknownQueueError``
    unless ``force``: a typo must not succeed quietly.
    """
    await _check_target(redis, keys, queue, "pause", force)
    try:
        await admin.set_paused(redis, keys, queue, paused=True)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, keys.paused, "set", f"{queue!r} not paused")
        return False
    return True


async def resume(redis: Redis, keys: Keys, queue: str, *, force: bool = False) -> bool:
    """Let workers fetch from ``queue`` again; False (and a warning) if that can't be recorded.

    Refused as ``pause`` is, except for a queue that is paused (however it got so).
    """
    check_queue_name(queue)
    if not force:
        try:
            paused = bool(await redis.sismember(keys.paused, queue))
        except ResponseError as exc:
            if not _is_wrong_type(exc):
                raise
            paused = False
        if not paused:
            await _check_target(redis, keys, queue, "resume", force)
    try:
        await admin.set_paused(redis, keys, queue, paused=False)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, keys.paused, "set", f"{queue!r} not resumed")
        return False
    # Wake idle workers blocked on the marker so the queue's backlog starts at once
    # (best effort: a broken marker only delays pickup to the idle interval).
    try:
        await admin.wake(redis, keys, queue)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
    return True


async def clear_queue(redis: Redis, keys: Keys, queue: str) -> int:
    """Remove every job waiting on ``queue``; returns how many were removed.

    Removed oldest first in atomic chunks up to the length seen first, each
    releasing the locks the jobs it removed hold (unique, periodic
    running); the count is exactly
    what was removed. A key of the wrong type is left alone.
    The queue stays listed (and paused, if it was). Its jobs held by a limit
    are removed first (``api.limits.clear_held_of_queue``): one let in
    meanwhile goes to the queue, removed next. The lines of its fair keys
    (``limits.fair``) are cleared the same way; their keys leave the ring at
    their next turn (the fetch drops a key with no jobs).
    """
    key = keys.queue(check_queue_name(queue))
    removed = await clear_held_of_queue(redis, keys, queue)
    lines = [keys.fair_jobs(queue, line.key) for line in await fair_lines(redis, keys, [queue])]
    for one in (key, *lines):
        try:
            # With the unique locks the removed jobs hold (unique/drop.py).
            removed += await drop_all(
                redis,
                one,
                kind="list",
                kinds=holds.kinds_table(keys),
                tracking_prefix=keys.tracking_prefix,  # tracked jobs end as JobDeleted
            )
        except ResponseError as exc:
            if not _is_wrong_type(exc):
                raise
            await _warn_wrong_type(redis, one, "list", "nothing removed")
    return removed
