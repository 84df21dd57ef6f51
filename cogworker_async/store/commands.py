"""One typed wrapper per Lua script of a job's own life: fetch, ack, file (and
hand over) a failure, give back, graduate, bury. Callers get small frozen
dataclasses back. The other families: ``orphans`` (recovery), ``locks``
(unique locks, operator drops), ``aborts``, ``admin``."""

from __future__ import annotations

import functools
import operator
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.observability import history
from cogworker_async.observability.history import Run
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script

DAY_STAT_TTL = history.DAY_TTL


def today(now: float | None = None) -> str:
    """The UTC day a per-day stat is counted under."""
    return _day_name(int((time.time() if now is None else now) // 86_400))


@functools.lru_cache(maxsize=4)
def _day_name(day: int) -> str:
    # Every fetch names today's counter: formatted once a day, not once a call.
    return time.strftime("%Y-%m-%d", time.gmtime(day * 86_400))


class Ack(NamedTuple):
    """A finished job to acknowledge: the raw bytes as fetched and its jid ("" if unknown).

    Only the raw bytes go to Redis (they are how the job is found on the
    in-progress list); the jid names the job in the worker's own logs.
    ``run``: its name, start and end for the metrics history (None: history off).
    ``lock``: a key the job holds, value = its jid (an ``until_executed`` job's
    unique lock, or an overlap=False periodic entry's running lock), released
    in the ack's own step, owner-checked, when the ack removes the job; "" for none.
    """

    raw: bytes
    jid: str
    run: Run | None = None
    lock: str = ""


_raw_of = operator.itemgetter(0)  # Ack.raw
_lock_of = operator.itemgetter(3)  # Ack.lock


def _ack_args(keys: Keys, acks: Sequence[Ack]) -> list[EncodableArg]:
    """The history groups and tags (both "" when no ack is counted), the acks,
    then the release block (see ``ack_jobs.lua``): ``0`` when no finished job
    holds a lock, so a plain ack pays one argument per call, not per job."""
    groups: bytes | str = ""
    tags: bytes | str = ""
    # The setting is per process, so a call's acks carry runs all or none: a
    # look at both ends, not a scan of every ack on the path with history off.
    if acks and (acks[0].run is not None or acks[-1].run is not None):
        groups, tags = history.pack([ack.run for ack in acks], keys.history_prefix)
    args: list[EncodableArg] = [groups, tags, len(acks)]
    args.extend(map(_raw_of, acks))  # at C speed, as the look for locks below
    if not any(map(_lock_of, acks)):  # the plain case
        args.append(0)
        return args
    locked = [(i, ack) for i, ack in enumerate(acks, 1) if ack.lock]
    args.append(len(locked))
    for position, ack in locked:
        args.extend((position, ack.lock, ack.jid))
    return args


@dataclass(frozen=True, slots=True)
class FetchResult:
    jobs: list[bytes]
    missing_acks: list[Ack]
    broken_queues: list[str]
    # (queue, how many) in the order of ``jobs``: where each job was fetched from.
    sources: list[tuple[str, int]] = field(default_factory=list)


async def fetch(
    redis: Redis,
    keys: Keys,
    *,
    identity: str,
    queues: Sequence[str],
    want: int,
    acks: Sequence[Ack],
    reliable: bool,
    suspects: bool = True,
) -> FetchResult:
    """Acknowledge ``acks`` and take up to ``want`` jobs from ``queues`` (in that order).

    ``suspects=False``: take no suspect (a queue whose front is one is skipped).
    """
    script_keys = [
        keys.in_progress(identity),
        keys.paused,
        keys.stats_processed,
        keys.stats_processed_on(today()),
        *(keys.queue(q) for q in queues),
    ]
    args: list[EncodableArg] = [
        "reliable" if reliable else "basic",
        want,
        keys.orphanings_prefix,
        keys.wakeup_prefix,
        DAY_STAT_TTL,
        1 if suspects else 0,
        *_ack_args(keys, acks),
        *queues,
    ]
    taken, missing, broken, sources = await script("fetch").run(redis, script_keys, args)
    names = [text(b) for b in broken]
    runs = [(text(sources[i]), int(sources[i + 1])) for i in range(0, len(sources), 2)]
    return FetchResult(list(taken), [acks[i - 1] for i in missing], names, runs)


async def ack(redis: Redis, keys: Keys, *, identity: str, acks: Sequence[Ack]) -> list[Ack]:
    """Acknowledge finished jobs; returns those that were already gone from the list."""
    script_keys = [
        keys.in_progress(identity),
        keys.stats_processed,
        keys.stats_processed_on(today()),
    ]
    args = [keys.orphanings_prefix, DAY_STAT_TTL, *_ack_args(keys, acks)]
    missing = await script("ack").run(redis, script_keys, args)
    return [acks[i - 1] for i in missing]


@dataclass(frozen=True, slots=True)
class Filing:
    """Where a failed job goes: ``target`` is the retry or dead set, or None to discard.

    ``counted``: the job's name for the metrics history ("" when it has none:
    unparseable), or None when the history is off.
    ``aborted``: the job was aborted (``target`` None): settled by
    ``settle_aborted.lua`` instead, counted as aborted, not failed.
    """

    raw: bytes
    jid: str
    target: str | None
    score: float
    entry: bytes
    counted: str | None = None
    aborted: bool = False
    # The lock the job holds (value = its jid), settled in the filing's own
    # step: an overlap=False periodic entry's running lock on every filing, an
    # `until_executed` unique lock on a terminal one. ``lock_ttl``: how long the
    # lock is kept while the retry waits (None: released, dead or discard).
    lock: str = ""
    lock_ttl: float | None = None


async def file(
    redis: Redis,
    keys: Keys,
    *,
    identity: str,
    filing: Filing,
    dead_max_jobs: int,
    dead_timeout: float,
    listed: bool = True,
) -> bool:
    """Move a failed job from in-progress into retry/dead (or discard it). False: it was gone.

    ``listed``: False in basic fetch, where the job is on no in-progress list."""
    now = time.time()
    day = today(now)
    script_keys = [
        keys.in_progress(identity),
        filing.target or keys.dead,
        keys.orphanings(filing.jid),
        keys.stats_processed,
        keys.stats_failed,
        keys.stats_processed_on(day),
        keys.stats_failed_on(day),
        keys.schedule_wakeup,
    ]
    args: list[EncodableArg] = [
        filing.raw,
        filing.score,
        filing.entry if filing.target else "",
        1 if filing.target == keys.dead else 0,
        dead_max_jobs,
        now - dead_timeout,
        DAY_STAT_TTL,
        "" if filing.counted is None else keys.history(history.minute_of(now)),
        filing.counted or "",
        history.MINUTE_TTL,
        1 if listed else 0,
    ]
    if filing.lock:
        ttl = "" if filing.lock_ttl is None else max(1, int(filing.lock_ttl * 1000))
        args.extend((filing.lock, filing.jid, ttl))
    return bool(await script("file").run(redis, script_keys, args))


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
) -> GiveBackResult:
    """Put in-progress jobs back on their queues, those still listed, in one atomic call.

    Give the newest first: the last one given runs first. Jobs no longer
    listed (another process's requeue moved them) are neither given nor kept.
    ``sources``: the queue a job was fetched from, where known; it goes back
    there, else to the queue its payload names.
    """
    targets = [sources.get(job, "") for job in jobs] if sources else [""] * len(jobs)
    args: list[EncodableArg] = [
        keys.queue_prefix,
        keys.wakeup_prefix,
        default_queue,
        len(jobs),
        *jobs,
        *targets,
        keys.periodic_running_prefix,
    ]
    given, kept = await script("give_back").run(redis, [keys.in_progress(identity)], args)
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


def unsettled_record(filing: Filing, keys: Keys) -> bytes:
    """The JSON record a stopping process hands over for a filing it couldn't make."""
    which = "dead" if filing.target == keys.dead else "retry"
    record: dict[str, Any] = {
        "set": which,
        "score": filing.score,
        "payload": filing.entry.decode(),
        "jid": filing.jid,
    }
    if filing.lock and filing.lock_ttl is None:
        record["release"] = [filing.lock, filing.jid]
    return orjson.dumps(record)


async def park_unsettled(
    redis: Redis, keys: Keys, *, identity: str, filing: Filing, listed: bool = True
) -> bool:
    """Hand a pending failure over to the unsettled list (removing it from in-progress;
    ``listed=False``: basic fetch, on no list)."""
    script_keys = [keys.in_progress(identity), keys.unsettled]
    args: list[EncodableArg] = [filing.raw, unsettled_record(filing, keys), 1 if listed else 0]
    return bool(await script("park_unsettled").run(redis, script_keys, args))


async def file_unsettled(
    redis: Redis,
    keys: Keys,
    *,
    record: bytes,
    target: str,
    jid: str,
    score: float,
    entry: bytes,
    counted: str | None = None,
    release: tuple[str, str] | None = None,
) -> bool:
    """File the head record of the unsettled list; False when someone else did.

    ``counted``: the job's name for the metrics history (None: history off)."""
    script_keys = [
        keys.unsettled,
        target,
        keys.orphanings(jid),
        keys.stats_processed,
        keys.stats_failed,
    ]
    args: list[EncodableArg] = [
        record,
        score,
        entry,
        "" if counted is None else keys.history(history.minute_of(time.time())),
        counted or "",
        history.MINUTE_TTL,
    ]
    if target == keys.dead or release is not None:
        args.append(keys.periodic_running_prefix)  # a terminal failure releases its lock
    if release is not None:
        args.extend(release)
    return bool(await script("file_unsettled").run(redis, script_keys, args))
