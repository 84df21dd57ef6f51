"""Jobs moved between the queues and the sets: given back, graduated when due,
buried when unrunnable."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.keys import Keys
from cogworker_async.store.commands.days import DAY_STAT_TTL, today
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script


@dataclass(frozen=True, slots=True)
class GiveBackResult:
    given: int
    # Still on the list and still the caller's: their queue refused the write.
    kept: list[bytes]


async def give_back(
    redis: Redis,
    keys: Keys,
    *,
    identity: str,
    jobs: Sequence[bytes],
    default_queue: str,
    sources: Mapping[bytes, str] | None = None,
    once: str | None = None,
) -> GiveBackResult:
    """Put in-progress jobs back on their queues, those still listed, in one atomic call.

    Give the newest first: the last one given runs first. Jobs no longer
    listed (another process's requeue moved them) are neither given nor kept.
    ``sources``: the queue a job was fetched from, where known; it goes back
    there, else to the queue its payload names. ``once``: basic fetch (the
    jobs are on no list, each is pushed): this give back's marker key
    (``Keys.given_back``), the same for every repeat of it, so a repeat after
    a lost reply pushes nothing twice.
    """
    targets = [sources.get(job, "") for job in jobs] if sources else [""] * len(jobs)
    args: list[EncodableArg] = [
        keys.queue_prefix,
        keys.wakeup_prefix,
        default_queue,
        len(jobs),
        *jobs,
        *targets,
        holds.kinds_table(keys),
    ]
    script_keys = (
        [keys.in_progress(identity)] if once is None else [keys.in_progress(identity), once]
    )
    given, kept = await script("give_back").run(redis, script_keys, args)
    return GiveBackResult(int(given), [jobs[i - 1] for i in kept])


@dataclass(frozen=True, slots=True)
class Graduation:
    """One due entry and the payload to push for it."""

    entry: bytes
    payload: bytes
    queue: str


@dataclass(frozen=True, slots=True)
class GraduateResult:
    moved: int
    deferred_queues: list[str]


async def graduate(
    redis: Redis, keys: Keys, *, source: str, items: Sequence[Graduation], defer: float
) -> GraduateResult:
    """Move due entries of ``source`` onto their queues; unpushable ones deferred by ``defer`` s."""
    args: list[EncodableArg] = [keys.queue_prefix, keys.wakeup_prefix, defer, time.time()]
    for item in items:
        args.extend((item.entry, item.payload, item.queue))
    moved, deferred = await script("graduate").run(redis, [source, keys.queues], args)
    return GraduateResult(int(moved), [text(d) for d in deferred])


async def bury(redis: Redis, keys: Keys, *, source: str, entry: bytes, dead_entry: bytes) -> bool:
    """Replace an unrunnable schedule/retry entry with its dead entry (raw kept)."""
    now = time.time()
    script_keys = [source, keys.dead, keys.stats_failed, keys.stats_failed_on(today(now))]
    return bool(
        await script("bury").run(redis, script_keys, [entry, dead_entry, now, DAY_STAT_TTL])
    )
