"""The retry, dead and schedule sets: reading entries without trusting them,
paging and searching a set, and moving or deleting its entries.

Moving an entry of the retry, dead or schedule set onto its queue is one Lua
call per entry (``enqueue_entry.lua``, through ``store.admin``): it is never
both queued and still in the set, and two operators retrying it at once move
it once. An entry that is not a runnable job is left where it is.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Collection, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import orjson
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async import holds, payload
from cogworker_async.api._common import (
    _SCAN_COUNT,
    _glob_escape,
    _is_wrong_type,
    _warn_wrong_type,
    log,
)
from cogworker_async.keys import Keys
from cogworker_async.store import admin, locks
from cogworker_async.store.replies import loose_text as _loose_text
from cogworker_async.unique.drop import drop_all
from cogworker_async.unique.lock import foreign_lock, lock_prefix

SetName = Literal["retry", "dead", "schedule"]
SET_NAMES: tuple[SetName, ...] = ("retry", "dead", "schedule")
DIGEST_PREFIX = "sha1:"
"""How an entry without a jid is referred to: ``sha1:`` and 16 hex digits of its bytes."""


def glob_contains(needle: str) -> str | None:
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


def matches(entry: Entry, needle: str) -> bool:
    return any(
        needle in field.lower()
        for field in (entry.name or "", entry.jid or "", _loose_text(entry.raw))
    )


async def scan_entries(redis: Redis, key: str, match: str | None) -> AsyncIterator[Entry]:
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
        found = [
            e async for e in scan_entries(redis, key, glob_contains(search)) if matches(e, needle)
        ]
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
    return [
        e
        async for e in scan_entries(redis, key, match)
        if e.jid in wanted or digest(e.raw) in wanted
    ]


async def find_entries(
    redis: Redis, keys: Keys, which: SetName, refs: Collection[str]
) -> list[Entry]:
    """The entries of the set named by jid (or the ``sha1:...`` ref of one without),
    for a detail view; a wrong-typed set is warned about and has none."""
    return await _find_or_warn(redis, set_key(keys, which), refs)


async def _find_or_warn(redis: Redis, key: str, refs: Collection[str]) -> list[Entry]:
    try:
        return await _find(redis, key, refs)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, key, "sorted set", "nothing found in it")
        return []


async def enqueue_now(redis: Redis, keys: Keys, source: str, entry: Entry) -> bool:
    """Move one entry onto its queue now; False if gone, not runnable, or its queue is broken."""
    if entry.job is None or entry.problem is not None or entry.queue is None:
        log.warning("%s entry %s left in place: %s", source, entry.ref, entry.problem)
        return False
    job = dict(entry.job)
    job["enqueued_at"] = time.time()
    foreign = foreign_lock(job, lock_prefix(keys)) if "unique" in job else None
    if foreign is not None:
        # enqueue_entry.lua writes no key outside the lock prefix: the job goes
        # back to its queue without a lock, and the operator is told why.
        log.warning(
            "%s entry %s names unique lock key %r, not under %s: moved without its lock",
            source,
            entry.ref,
            foreign,
            lock_prefix(keys),
        )
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
        moved += await enqueue_now(redis, keys, key, entry)
    return moved


async def retry_all(redis: Redis, keys: Keys, which: SetName) -> int:
    """Put every runnable entry of the set on its queue now; returns how many moved."""
    key = set_key(keys, which)
    moved = 0
    try:
        # SCAN returns every entry present throughout, even as entries are removed.
        async for entry in scan_entries(redis, key, None):
            moved += await enqueue_now(redis, keys, key, entry)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, key, "sorted set", "nothing moved")
    return moved


def _ending(keys: Keys, which: SetName) -> str:
    """Deleting ends a waiting job (its status and result waiters are told, JobDeleted);
    a dead one has ended already and keeps what it said."""
    return "" if which == "dead" else keys.tracking_prefix


async def delete(redis: Redis, keys: Keys, which: SetName, jids: Iterable[str]) -> int:
    """Remove the entries named by jid (or ``sha1:`` digest); returns how many were removed."""
    key = set_key(keys, which)
    entries = await _find_or_warn(redis, key, list(jids))
    if not entries:
        return 0
    # Removed with their locks (unique, periodic running) released, in one step.
    return await locks.drop_jobs(
        redis,
        key,
        entries=[e.raw for e in entries],
        kinds=holds.kinds_table(keys),
        tracking_prefix=_ending(keys, which),
    )


async def delete_all(redis: Redis, keys: Keys, which: SetName) -> int:
    """Empty the set; returns how many entries were removed (a wrong-typed key is kept).

    The jobs removed release their locks (unique, periodic running) in the
    steps that remove them (``drop_jobs.lua``)."""
    key = set_key(keys, which)
    try:
        # Unlike DEL, this refuses a key of another type: bad data stays for a human.
        return await drop_all(
            redis,
            key,
            kind="zset",
            kinds=holds.kinds_table(keys),
            tracking_prefix=_ending(keys, which),
        )
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, key, "sorted set", "nothing removed")
        return 0
