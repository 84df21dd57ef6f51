"""Read and admin views over the wire contract: queues, sets, processes, stats.

The CLI and the web UI are thin layers over these functions. None of them
raises on bad data: a key of the wrong type reads as empty and is named in a
warning (the worker's key guard moves it to ``<ns>:quarantine:...``); an entry
that is not a runnable job is listed with ``job=None`` or a ``problem`` saying
why, and the moving actions leave it where it is. Connection errors propagate:
the caller decides what an outage means.

Moving an entry of the retry, dead or schedule set onto its queue is one Lua
call per entry (``enqueue_entry.lua``): it is never both queued and still in
the set, and two operators retrying it at once move it once.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import AsyncIterator, Collection, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import orjson
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async import payload
from cogworker_async.keys import Keys
from cogworker_async.store import admin

log = logging.getLogger(__name__)

SetName = Literal["retry", "dead", "schedule"]
SET_NAMES: tuple[SetName, ...] = ("retry", "dead", "schedule")
DIGEST_PREFIX = "sha1:"
"""How an entry without a jid is referred to: ``sha1:`` and 16 hex digits of its bytes."""

_SCAN_COUNT = 500
_GLOB_SPECIAL = frozenset("*?[]\\")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _loose_text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _is_wrong_type(exc: BaseException) -> bool:
    return isinstance(exc, ResponseError) and str(exc).startswith("WRONGTYPE")


async def _warn_wrong_type(redis: Redis, key: str, expected: str, consequence: str) -> None:
    found = _text(await redis.type(key))
    log.warning(
        "%s holds a %s, not a %s: %s (a worker's key guard moves it to quarantine)",
        key,
        found,
        expected,
        consequence,
    )


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in _GLOB_SPECIAL else ch for ch in text)


def _glob_contains(needle: str) -> str | None:
    """A SCAN MATCH pattern for "contains ``needle``, ignoring ASCII case", or None.

    Redis globs match bytes, so only an ASCII needle can be matched without
    case in Redis; any other needle is filtered here instead.
    """
    if not needle.isascii():
        return None
    parts = []
    for ch in needle:
        if ch.isalpha():
            parts.append(f"[{ch.lower()}{ch.upper()}]")
        else:
            parts.append(_glob_escape(ch))
    return "*" + "".join(parts) + "*"


# --- queues and stats ---------------------------------------------------------


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
    try:
        members = await redis.smembers(keys.queues)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, keys.queues, "set", "no queue listed")
        return []
    return sorted(_loose_text(n) for n in members)


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
    now = time.time()
    result = []
    for index, name in enumerate(names):
        size, oldest = replies[1 + 2 * index], replies[2 + 2 * index]
        result.append(
            QueueInfo(
                name=name,
                size=size if isinstance(size, int) else 0,
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
        for name in RECOVERY_COUNTERS:
            pipe.get(keys.stat(name))
        replies = await pipe.execute(raise_on_error=False)
    processed, failed, scheduled, retry, dead, identities, parked, *counters = (
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
    )


SIGNALS = ("quiet", "stop")
SIGNAL_TTL = 60


async def send_signal(redis: Redis, keys: Keys, identity: str, name: str) -> bool:
    """Ask process ``identity`` to go quiet or stop (read on its next beat).

    Returns False when no live process has that identity (nothing is sent)."""
    if name not in SIGNALS:
        raise ValueError(f"unknown signal {name!r}: expected one of {', '.join(SIGNALS)}")
    if not await redis.exists(keys.process(identity)):
        return False
    async with redis.pipeline(transaction=True) as pipe:
        pipe.rpush(keys.signals(identity), name)
        pipe.expire(keys.signals(identity), SIGNAL_TTL)
        await pipe.execute()
    return True


async def pause(redis: Redis, keys: Keys, queue: str) -> bool:
    """Stop workers fetching from ``queue``; False (and a warning) if that can't be recorded."""
    try:
        await redis.sadd(keys.paused, queue)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, keys.paused, "set", f"{queue!r} not paused")
        return False
    return True


async def resume(redis: Redis, keys: Keys, queue: str) -> bool:
    """Let workers fetch from ``queue`` again; False (and a warning) if that can't be recorded."""
    try:
        await redis.srem(keys.paused, queue)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, keys.paused, "set", f"{queue!r} not resumed")
        return False
    # Wake idle workers blocked on the marker so the queue's backlog starts at once
    # (best effort: a broken marker only delays pickup to the idle interval).
    try:
        await redis.zadd(keys.wakeup(queue), {"1": 0})
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
    return True


async def clear_queue(redis: Redis, keys: Keys, queue: str) -> int:
    """Remove every job waiting on ``queue``; returns how many were removed.

    LLEN and the trim are one transaction, so the count is exactly what was
    removed. A key of the wrong type is left alone (both commands refuse it).
    The queue stays listed (and paused, if it was).
    """
    key = keys.queue(queue)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.llen(key)
        pipe.ltrim(key, 1, 0)  # an empty range: the list is emptied (and so deleted)
        size, _ = await pipe.execute(raise_on_error=False)
    if isinstance(size, Exception):
        if not _is_wrong_type(size):
            raise size
        await _warn_wrong_type(redis, key, "list", "nothing removed")
        return 0
    return int(size)


# --- the retry, dead and schedule sets ------------------------------------------


def set_key(keys: Keys, which: SetName) -> str:
    """The key of the named sorted set (``ValueError`` for another name)."""
    if which == "retry":
        return keys.retry
    if which == "dead":
        return keys.dead
    if which == "schedule":
        return keys.schedule
    raise ValueError(f"unknown set {which!r}: expected one of {', '.join(SET_NAMES)}")


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the retry, dead or schedule set, read without trusting it.

    ``job`` is None when the entry is not a JSON object; ``problem`` says why
    it can't be put on a queue (None when it can). ``score`` is epoch seconds:
    when it is due (retry, schedule) or when it failed (dead).
    """

    raw: bytes
    score: float
    job: dict[str, Any] | None
    jid: str | None
    name: str | None
    queue: str | None
    error_class: str | None
    error_message: str | None
    problem: str | None = None

    @property
    def ref(self) -> str:
        """How to name this entry to ``retry_now``/``delete``: its jid, else a digest of it."""
        return self.jid or digest(self.raw)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``raw`` as text (undecodable bytes replaced), ``ref`` added."""
        data = asdict(self)
        data["raw"] = _loose_text(self.raw)
        data["ref"] = self.ref
        return data


def digest(raw: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:16]


def parse_entry(raw: bytes, score: float) -> Entry:
    """Read an entry leniently: whatever can be known about it, and what is wrong."""
    try:
        job = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return Entry(raw, score, None, None, None, None, None, None, f"not JSON: {exc}")
    if not isinstance(job, dict):
        kind = type(job).__name__
        return Entry(
            raw, score, None, None, None, None, None, None, f"not a JSON object but {kind}"
        )

    def text(field: str) -> str | None:
        value = job.get(field)
        return value if isinstance(value, str) else None

    try:
        payload.decode(raw)
    except payload.PayloadError as exc:
        problem: str | None = str(exc)
    else:
        problem = None
    return Entry(
        raw=raw,
        score=score,
        job=job,
        jid=text("jid"),
        name=text("class"),
        queue=text("queue"),
        error_class=text("error_class"),
        error_message=text("error_message"),
        problem=problem,
    )


def _matches(entry: Entry, needle: str) -> bool:
    return any(
        needle in field.lower()
        for field in (entry.name or "", entry.jid or "", _loose_text(entry.raw))
    )


async def _scan(redis: Redis, key: str, match: str | None) -> AsyncIterator[Entry]:
    async for raw, score in redis.zscan_iter(key, match=match, count=_SCAN_COUNT):
        yield parse_entry(raw if isinstance(raw, bytes) else raw.encode(), float(score))


async def list_entries(
    redis: Redis,
    keys: Keys,
    which: SetName,
    *,
    search: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[Entry]:
    """A page of the set: dead newest first, retry and schedule soonest due first.

    ``search`` keeps entries whose job name, jid or raw text contains it
    (ignoring case); the set is scanned for it.
    """
    key = set_key(keys, which)
    newest_first = which == "dead"
    if limit <= 0:
        return []
    offset = max(0, offset)
    try:
        if not search:
            rows: list[tuple[bytes, float]] = await redis.zrange(  # type: ignore[assignment]
                key, offset, offset + limit - 1, desc=newest_first, withscores=True
            )
            return [parse_entry(raw, float(score)) for raw, score in rows]
        needle = search.lower()
        found = [e async for e in _scan(redis, key, _glob_contains(search)) if _matches(e, needle)]
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, key, "sorted set", "listed as empty")
        return []
    # Equal scores in member order, as ZRANGE gives them.
    found.sort(key=lambda e: (e.score, e.raw), reverse=newest_first)
    return found[offset : offset + limit]


async def _find(redis: Redis, key: str, refs: Collection[str]) -> list[Entry]:
    """Every entry of ``key`` whose jid or digest is in ``refs`` (one pass over the set)."""
    wanted = set(refs)
    if not wanted:
        return []
    # One jid: let Redis filter by it. Anything else: one pass without a filter
    # (a digest is not in the entry's text, and N filtered passes cost N passes).
    only = next(iter(wanted)) if len(wanted) == 1 else None
    match = None if only is None or only.startswith(DIGEST_PREFIX) else f"*{_glob_escape(only)}*"
    return [e async for e in _scan(redis, key, match) if e.jid in wanted or digest(e.raw) in wanted]


async def _find_or_warn(redis: Redis, key: str, refs: Collection[str]) -> list[Entry]:
    try:
        return await _find(redis, key, refs)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, key, "sorted set", "nothing found in it")
        return []


async def _enqueue(redis: Redis, keys: Keys, source: str, entry: Entry) -> bool:
    """Move one entry onto its queue now; False if gone, not runnable, or its queue is broken."""
    if entry.job is None or entry.problem is not None or entry.queue is None:
        log.warning("%s entry %s left in place: %s", source, entry.ref, entry.problem)
        return False
    job = dict(entry.job)
    job["enqueued_at"] = time.time()
    try:
        return await admin.enqueue_entry(
            redis,
            keys,
            source=source,
            entry=entry.raw,
            payload=orjson.dumps(job),
            queue=entry.queue,
        )
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(
            redis, keys.queue(entry.queue), "list", f"{source} entry {entry.ref} left in place"
        )
        return False


async def retry_now(redis: Redis, keys: Keys, which: SetName, jids: Iterable[str]) -> int:
    """Put the entries named by jid (or ``sha1:`` digest) on their queues now; how many moved.

    ``retry_count`` is kept and ``enqueued_at`` set to now. Entries already
    gone, or not runnable (left in place, with a warning), are not counted.
    """
    key = set_key(keys, which)
    moved = 0
    for entry in await _find_or_warn(redis, key, list(jids)):
        moved += await _enqueue(redis, keys, key, entry)
    return moved


async def retry_all(redis: Redis, keys: Keys, which: SetName) -> int:
    """Put every runnable entry of the set on its queue now; returns how many moved."""
    key = set_key(keys, which)
    moved = 0
    try:
        # SCAN returns every entry present throughout, even as entries are removed.
        async for entry in _scan(redis, key, None):
            moved += await _enqueue(redis, keys, key, entry)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, key, "sorted set", "nothing moved")
    return moved


async def delete(redis: Redis, keys: Keys, which: SetName, jids: Iterable[str]) -> int:
    """Remove the entries named by jid (or ``sha1:`` digest); returns how many were removed."""
    key = set_key(keys, which)
    entries = await _find_or_warn(redis, key, list(jids))
    if not entries:
        return 0
    return int(await redis.zrem(key, *(e.raw for e in entries)))


async def delete_all(redis: Redis, keys: Keys, which: SetName) -> int:
    """Empty the set; returns how many entries were removed (a wrong-typed key is kept)."""
    key = set_key(keys, which)
    try:
        # Unlike DEL, this refuses a key of another type: bad data stays for a human.
        return int(await redis.zremrangebyrank(key, 0, -1))
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, key, "sorted set", "nothing removed")
        return 0


# --- processes and what they run ------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """A process in ``<ns>:processes``; ``alive`` when its presence key exists.

    The other fields come from its presence key (None when gone or unreadable,
    ``problem`` then says why); ``last_beat`` is on Redis's clock.
    """

    identity: str
    alive: bool
    hostname: str | None = None
    pid: int | None = None
    queues: list[str] | None = None
    concurrency: int | None = None
    busy: int | None = None
    started_at: float | None = None
    last_beat: float | None = None
    version: str | None = None
    rss: int | None = None
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _field(info: dict[str, Any], name: str, kind: type[Any] | tuple[type[Any], ...]) -> Any:
    value = info.get(name)
    # bool is an int in Python, never a pid or a count on the wire.
    if isinstance(value, bool) or not isinstance(value, kind):
        return None
    return value


def _number(value: object) -> float | None:
    try:
        return float(value) if isinstance(value, bytes | str | int | float) else None
    except ValueError:
        return None


def _process(identity: str, presence: object, beat: object) -> ProcessInfo:
    last_beat = None if isinstance(beat, Exception) else _number(beat)
    if presence is None:
        return ProcessInfo(identity, alive=False, last_beat=last_beat)
    if isinstance(presence, Exception):
        return ProcessInfo(identity, alive=True, last_beat=last_beat, problem=str(presence))
    try:
        info = orjson.loads(presence)  # type: ignore[arg-type]
    except (orjson.JSONDecodeError, TypeError) as exc:
        return ProcessInfo(identity, True, last_beat=last_beat, problem=f"info not JSON: {exc}")
    if not isinstance(info, dict):
        return ProcessInfo(identity, True, last_beat=last_beat, problem="info not a JSON object")
    queues = info.get("queues")
    return ProcessInfo(
        identity=identity,
        alive=True,
        hostname=_field(info, "hostname", str),
        pid=_field(info, "pid", int),
        queues=[q for q in queues if isinstance(q, str)] if isinstance(queues, list) else None,
        concurrency=_field(info, "concurrency", int),
        busy=_field(info, "busy", int),
        started_at=_number(_field(info, "started_at", (int, float))),
        last_beat=last_beat,
        version=_field(info, "version", str),
        rss=_field(info, "rss", int),
    )


async def processes(redis: Redis, keys: Keys) -> list[ProcessInfo]:
    """Every process listed, live or not, by identity."""
    try:
        members = await redis.smembers(keys.processes)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, keys.processes, "set", "no process listed")
        return []
    identities = sorted(_loose_text(m) for m in members)
    if not identities:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for identity in identities:
            pipe.get(keys.process(identity))
            pipe.hget(keys.last_beat, identity)
        replies = await pipe.execute(raise_on_error=False)
    return [
        _process(identity, replies[2 * i], replies[2 * i + 1])
        for i, identity in enumerate(identities)
    ]


@dataclass(frozen=True, slots=True)
class BusyJob:
    """A job a live process runs now (from its ``workers`` hash).

    ``payload`` is the job as fetched; ``job`` is None (and ``problem`` says
    why) when the slot's record or the payload can't be read.
    """

    identity: str
    slot: str
    queue: str | None
    jid: str | None
    name: str | None
    run_at: float | None
    payload: str | None
    job: dict[str, Any] | None
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _busy_job(identity: str, slot: str, record: bytes) -> BusyJob:
    try:
        work = orjson.loads(record)
    except orjson.JSONDecodeError as exc:
        return BusyJob(identity, slot, None, None, None, None, None, None, f"not JSON: {exc}")
    if not isinstance(work, dict):
        return BusyJob(identity, slot, None, None, None, None, None, None, "not a JSON object")
    raw = work.get("payload")
    queue = _field(work, "queue", str)
    run_at = _number(_field(work, "run_at", (int, float)))
    if not isinstance(raw, str):
        return BusyJob(identity, slot, queue, None, None, run_at, None, None, "no payload")
    entry = parse_entry(raw.encode(), 0.0)
    problem = None if entry.job is not None else entry.problem
    return BusyJob(
        identity, slot, queue or entry.queue, entry.jid, entry.name, run_at, raw, entry.job, problem
    )


def _slot_order(job: BusyJob) -> tuple[str, int, str]:
    return (job.identity, int(job.slot) if job.slot.isdigit() else -1, job.slot)


async def busy(redis: Redis, keys: Keys) -> list[BusyJob]:
    """What every live process runs now, by process and slot."""
    live = [p.identity for p in await processes(redis, keys) if p.alive]
    if not live:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for identity in live:
            pipe.hgetall(keys.workers(identity))
        replies = await pipe.execute(raise_on_error=False)
    result: list[BusyJob] = []
    for identity, reply in zip(live, replies, strict=True):
        if isinstance(reply, Exception):
            if not _is_wrong_type(reply):
                raise reply
            await _warn_wrong_type(redis, keys.workers(identity), "hash", "its work not shown")
            continue
        for slot, record in reply.items():
            result.append(_busy_job(identity, _loose_text(slot), record))
    result.sort(key=_slot_order)
    return result


# --- quarantine ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuarantinedKey:
    """A key the key guard moved aside; ``ttl`` in seconds, None if it has no expiry."""

    key: str
    type: str
    ttl: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def quarantine_list(redis: Redis, keys: Keys) -> list[QuarantinedKey]:
    """Every ``<ns>:quarantine:*`` key, by name (SCAN: never blocks Redis)."""
    pattern = _glob_escape(keys.quarantine("")) + "*"
    names = sorted(
        {_loose_text(k) async for k in redis.scan_iter(match=pattern, count=_SCAN_COUNT)}
    )
    if not names:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.type(name)
            pipe.ttl(name)
        replies = await pipe.execute(raise_on_error=False)
    result = []
    for i, name in enumerate(names):
        kind, ttl = replies[2 * i], replies[2 * i + 1]
        if isinstance(kind, bytes | str) and _text(kind) == "none":
            continue  # expired or deleted since the scan
        result.append(
            QuarantinedKey(
                key=name,
                type=_text(kind) if isinstance(kind, bytes | str) else "unknown",
                ttl=ttl if isinstance(ttl, int) and ttl >= 0 else None,
            )
        )
    return result
