"""One typed wrapper per Lua script of a job's own life: fetch, ack, file (and
hand over) a failure, give back, graduate, bury. Callers get small frozen
dataclasses back. The other families: ``orphans`` (recovery), ``locks``
(unique locks, operator drops), ``aborts``, ``admin``."""

from __future__ import annotations

import enum
import functools
import operator
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.holds import Event, Hold
from cogworker_async.keys import Keys
from cogworker_async.observability import history
from cogworker_async.observability.history import Run
from cogworker_async.store import aborts
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


class End(NamedTuple):
    """What a tracked job's ack writes of its end, in the ack's own step
    (``includes/acked_ends.lua``): its final status fields (``status``, a JSON
    object of strings, b"" for none) kept ``status_ttl`` s, and its kept result
    (``envelope``, b"" for none) kept ``result_ttl`` s, with its "gone" marker
    ``gone_ttl`` s (``client/results.py``)."""

    jid: str
    status: bytes
    status_ttl: int
    envelope: bytes
    result_ttl: int
    gone_ttl: int


class Start(NamedTuple):
    """A tracked job's ``working`` status, riding the next fetch
    (``includes/acked_ends.lua``, ``write_started``): its fields (sent as a JSON
    object of strings: ``status_json``) and its start (``started_at``, as the
    fields say), kept ``status_ttl`` s; skipped when the hash already tells this
    run's end. Encoded only when a call carries it: an end that finds it still
    waiting writes its fields with its own instead."""

    jid: str
    fields: Mapping[str, Any]
    started_at: float
    status_ttl: int


def status_json(fields: Mapping[str, Any]) -> bytes:
    """Status fields as the JSON object of strings ``includes/acked_ends.lua`` writes
    (each value as redis-py would send it: a str as is, a number by ``str``)."""
    return orjson.dumps({k: v if isinstance(v, str) else str(v) for k, v in fields.items()})


class Ack(NamedTuple):
    """A finished job to acknowledge: the raw bytes as fetched and its jid ("" if unknown).

    Only the raw bytes go to Redis (they are how the job is found on the
    in-progress list); the jid names the job in the worker's own logs.
    ``run``: its name, start and end for the metrics history (None: history off).
    ``holds``: what the job holds (an ``until_executed`` job's unique lock, an
    overlap=False periodic entry's running lock, ...): settled as each kind's
    ack rule says, in the ack's own step, owner-checked, when the ack removes
    the job; () for none.
    ``end``: its kept result and final status (a tracked job), written with the
    ack; None for a plain job.
    """

    raw: bytes
    jid: str
    run: Run | None = None
    holds: tuple[Hold, ...] = ()
    end: End | None = None


_raw_of = operator.itemgetter(0)  # Ack.raw
_holds_of = operator.itemgetter(3)  # Ack.holds
_end_of = operator.itemgetter(4)  # Ack.end
END_FIELDS = 6  # what one End puts on the wire (``includes/acked_ends.lua``)


def _ack_args(keys: Keys, acks: Sequence[Ack]) -> list[EncodableArg]:
    """The history groups and tags (both "" when no ack is counted), the acks,
    then the holds block (see ``includes/holds.lua``): ``0`` when no finished
    job holds anything, so a plain ack pays one argument per call, not per job."""
    groups: bytes | str = ""
    tags: bytes | str = ""
    # The setting is per process, so a call's acks carry runs all or none: a
    # look at both ends, not a scan of every ack on the path with history off.
    if acks and (acks[0].run is not None or acks[-1].run is not None):
        groups, tags = history.pack([ack.run for ack in acks], keys.history_prefix)
    args: list[EncodableArg] = [groups, tags, len(acks)]
    args.extend(map(_raw_of, acks))  # at C speed, as the look for holds below
    if not any(map(_holds_of, acks)):  # the plain case
        args.append(0)
        return args
    held: list[EncodableArg] = []
    for position, ack in enumerate(acks, 1):
        if ack.holds:
            held.extend(holds.encode(keys, ack.holds, Event.ACK, position=position))
    args.append(len(held) // holds.HOLD_FIELDS)
    args.extend(held)
    return args


def _end_args(keys: Keys, acks: Sequence[Ack], starts: Sequence[Start] = ()) -> list[EncodableArg]:
    """The ends block (see ``includes/acked_ends.lua``), the last arguments of the
    call: nothing at all when no finished job keeps a result or tracks its
    status and no "working" write rides along (a plain batch pays nothing for
    it), else the tracking prefix, the count and one group per ``End``, then
    the count and one group per ``Start``."""
    if not starts and not any(map(_end_of, acks)):  # the plain case
        return []
    ends = [ack.end for ack in acks if ack.end is not None]
    args: list[EncodableArg] = [keys.tracking_prefix, len(ends)]
    for end in ends:
        args.extend(end)
    args.append(len(starts))
    for start in starts:
        args.extend((start.jid, status_json(start.fields), start.started_at, start.status_ttl))
    return args


@dataclass(frozen=True, slots=True)
class FetchResult:
    jobs: list[bytes]
    missing_acks: list[Ack]
    broken_queues: list[str]
    # (queue, how many) in the order of ``jobs``: where each job was fetched from.
    sources: list[tuple[str, int]] = field(default_factory=list)
    # The unique locks renewed as their jobs were taken (``unique_prefix``).
    renewals: list[Renewal] = field(default_factory=list)
    # (key, error) of each end or "working" write that failed (a wrong-typed key).
    end_failures: list[tuple[str, str]] = field(default_factory=list)


class Renewal(NamedTuple):
    """An ``until_executed`` job's lock renewed by the fetch that took it: the job
    (raw, as taken), its jid, and the jid holding the lock afterwards (its own
    when renewed or taken again; another copy's, left alone; None when the key
    is not a string)."""

    raw: bytes
    jid: str
    holder: str | None


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
    unique_prefix: str = "",
    unique_default: float = 3600.0,
    starts: Sequence[Start] = (),
) -> FetchResult:
    """Acknowledge ``acks`` and take up to ``want`` jobs from ``queues`` (in that order).

    ``suspects=False``: take no suspect (a queue whose front is one is skipped).
    ``unique_prefix``: the unique locks' prefix; an ``until_executed`` job taken
    has its lock (under it) renewed for its ``unique_for`` (``unique_default``
    s when its payload names none) in the same step ("": none renewed).
    ``starts``: tracked jobs' ``working`` writes, made in the same step.
    A job whose limit is full is parked on it instead of taken (``limits``).
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
        unique_prefix,
        max(1, int(unique_default * 1000)),
        keys.limits_prefix,
        *_end_args(keys, acks, starts),
    ]
    reply = await script("fetch").run(redis, script_keys, args)
    taken, missing, broken, sources, renewed, failed = reply
    names = [text(b) for b in broken]
    runs = [(text(sources[i]), int(sources[i + 1])) for i in range(0, len(sources), 2)]
    renewals = [
        Renewal(
            taken[renewed[i] - 1],
            text(renewed[i + 1]),
            None if renewed[i + 2] is None else text(renewed[i + 2]),
        )
        for i in range(0, len(renewed), 3)
    ]
    failures = [(text(failed[i]), text(failed[i + 1])) for i in range(0, len(failed), 2)]
    return FetchResult(list(taken), [acks[i - 1] for i in missing], names, runs, renewals, failures)


async def ack(redis: Redis, keys: Keys, *, identity: str, acks: Sequence[Ack]) -> list[Ack]:
    """Acknowledge finished jobs; returns those that were already gone from the list."""
    script_keys = [
        keys.in_progress(identity),
        keys.stats_processed,
        keys.stats_processed_on(today()),
    ]
    args = [keys.orphanings_prefix, DAY_STAT_TTL, *_ack_args(keys, acks), *_end_args(keys, acks)]
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
    # What the job holds, settled in the filing's own step as each kind's rule
    # for the filing's event says (``filing_event``): a retry keeps an `until_executed`
    # unique lock and a periodic running lock for its delay plus their TTL, a
    # terminal filing releases them; a retry that turns into an abort (the job
    # has a tombstone: see ``FileOutcome``) settles them as an abort.
    holds: tuple[Hold, ...] = ()


def filing_event(filing: Filing, keys: Keys) -> Event:
    """How a filing settles its job, for its holds' rules."""
    if filing.aborted:
        return Event.ABORT
    if filing.target is None:
        return Event.DISCARD
    return Event.DEAD if filing.target == keys.dead else Event.RETRY


class FileOutcome(enum.IntEnum):
    """What ``file`` did (falsy only for GONE, so ``if await file(...)`` reads "filed")."""

    GONE = 0  # no longer on the list: recovery requeued it while it ran here
    FILED = 1  # into retry or dead, or discarded
    # An abort was answered ("cancelling") while its failure was being filed:
    # settled as aborted instead of retried, so it never runs again.
    ABORTED = 2


async def file(
    redis: Redis,
    keys: Keys,
    *,
    identity: str,
    filing: Filing,
    dead_max_jobs: int,
    dead_timeout: float,
    listed: bool = True,
) -> FileOutcome:
    """Move a failed job from in-progress into retry/dead (or discard it); see ``FileOutcome``.

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
        keys.aborted,
        keys.stat("aborted"),
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
    retry = filing.target == keys.retry and filing.jid != ""
    # Only a retry would run it again: it alone checks for an abort's tombstone,
    # and sends its holds settled both ways (filed, or aborted instead).
    args.append(filing.jid if retry else "")
    args.extend(
        holds.block(keys, filing.holds, filing_event(filing, keys), wait=filing.score - now)
    )
    if retry:
        args.extend(holds.block(keys, filing.holds, Event.ABORT))
    return FileOutcome(int(await script("file").run(redis, script_keys, args)))


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


def unsettled_record(filing: Filing, keys: Keys) -> bytes:
    """The JSON record a stopping process hands over for a filing it couldn't make."""
    which = "dead" if filing.target == keys.dead else "retry"
    record: dict[str, Any] = {
        "set": which,
        "score": filing.score,
        "payload": filing.entry.decode(),
        "jid": filing.jid,
    }
    gone = holds.released(filing.holds, filing_event(filing, keys))
    if gone:
        # The record's one release pair (SPEC: "release": [key, jid]).
        record["release"] = [gone[0].key, gone[0].owner]
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
) -> FileOutcome:
    """File the head record of the unsettled list; ``GONE`` when someone else did (or
    an abort removed it), ``ABORTED`` when the job has an abort tombstone and is
    bound for retry: settled as aborted instead, its waiters told, never run again.

    What the job holds (its payload says) is settled in the same step as the
    rule of its filing says (dead: released; retry: kept for the wait plus
    its TTL; aborted: released). ``counted``: the job's name for the metrics
    history (None: history off)."""
    script_keys = [
        keys.unsettled,
        target,
        keys.orphanings(jid),
        keys.stats_processed,
        keys.stats_failed,
        keys.aborted,
        keys.stat("aborted"),
    ]
    args: list[EncodableArg] = [
        record,
        score,
        entry,
        "" if counted is None else keys.history(history.minute_of(time.time())),
        counted or "",
        history.MINUTE_TTL,
    ]
    event = Event.DEAD if target == keys.dead else Event.RETRY
    wait_ms = max(0, int((score - time.time()) * 1000)) if event is Event.RETRY else 0
    args.extend((holds.kinds_table(keys), event.value, wait_ms))
    # As file.lua: only a filing into retry would run the job again.
    args.extend(
        (
            jid if event is Event.RETRY else "",
            keys.tracking_prefix,
            aborts.ERROR_CLASS,
            aborts.WHILE_RUNNING,
            time.time(),
        )
    )
    return FileOutcome(int(await script("file_unsettled").run(redis, script_keys, args)))
