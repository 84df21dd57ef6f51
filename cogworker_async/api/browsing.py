"""What the web UI's pages read beyond the rest of ``api``: bounded pages and searches
of big sets and lists.

The invariant: no page reads a whole set or list. A page of a sorted set is one
``ZRANGE ... LIMIT``; a page of a queue one ``LRANGE`` window; a search is a
``ZSCAN`` that stops after ``SEARCH_WORK`` entries examined (or a page of
matches) and hands back the cursor for a "more" link; a single entry is found
by its score (``ZRANGEBYSCORE`` on that one score), never by a scan.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async import api
from cogworker_async.api.running import busy_job, slot_order
from cogworker_async.api.sets import glob_contains, matches
from cogworker_async.keys import Keys
from cogworker_async.store import admin
from cogworker_async.store.commands import day_name
from cogworker_async.store.faults import is_wrong_type
from cogworker_async.store.replies import loose_text, text
from cogworker_async.store.replies import raw as as_bytes

PAGE_SIZE = 50
SEARCH_WORK = 10_000
"""Entries a search examines per request at most (the rest is behind "more")."""
SEARCH_SECONDS = 0.08
"""...and the time it spends scanning at most, whatever Redis's speed."""
SCAN_COUNT = 500
HISTORY_DAYS = 14


@dataclass(frozen=True, slots=True)
class Ref:
    """An entry as a page names it: its exact score and its jid (or digest)."""

    score: float
    ref: str


async def _mistyped(redis: Redis, key: str, expected: str, reply: object) -> str:
    """What to show for a key that refused a read: its wrong type, or the error as is."""
    if isinstance(reply, ResponseError) and not is_wrong_type(reply):
        raise reply
    return f"{key} holds a {text(await redis.type(key))}, not a {expected}"


@dataclass(frozen=True, slots=True)
class SetPage:
    entries: list[api.Entry]
    total: int
    problem: str | None = None
    cursor: int = 0
    """Search only: where the next request goes on (0: the scan is done)."""
    examined: int = 0


async def set_page(
    redis: Redis, keys: Keys, which: api.SetName, *, page: int, size: int = PAGE_SIZE
) -> SetPage:
    """One page of the set (dead newest first, the others soonest due first)."""
    key = api.set_key(keys, which)
    start = max(0, page - 1) * size
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zcard(key)
        pipe.zrange(key, start, start + size - 1, desc=which == "dead", withscores=True)
        total, rows = await pipe.execute(raise_on_error=False)
    if isinstance(total, ResponseError) or isinstance(rows, ResponseError):
        return SetPage([], 0, problem=await _mistyped(redis, key, "sorted set", total))
    return SetPage([api.parse_entry(raw, float(score)) for raw, score in rows], int(total))


async def search_set(
    redis: Redis, keys: Keys, which: api.SetName, needle: str, *, cursor: int = 0
) -> SetPage:
    """Up to a page of entries whose name, jid or text contains ``needle`` (any case).

    In scan order, from ``cursor``, examining at most about ``SEARCH_WORK``
    entries for at most ``SEARCH_SECONDS``; the returned cursor is where to go
    on (0 when the set is done).
    """
    key = api.set_key(keys, which)
    match = glob_contains(needle)
    lowered = needle.lower()
    found: list[api.Entry] = []
    examined = 0
    deadline = time.monotonic() + SEARCH_SECONDS
    try:
        total = int(await redis.zcard(key))
        while examined < SEARCH_WORK and len(found) < PAGE_SIZE and time.monotonic() < deadline:
            cursor, rows = await redis.zscan(key, cursor, match=match, count=SCAN_COUNT)
            examined += SCAN_COUNT
            for raw, score in rows:
                entry = api.parse_entry(as_bytes(raw), float(score))  # type: ignore[arg-type]
                if matches(entry, lowered):
                    found.append(entry)
            if cursor == 0:
                break
    except ResponseError as exc:
        if not is_wrong_type(exc):
            raise
        kind = text(await redis.type(key))
        return SetPage([], 0, problem=f"{key} holds a {kind}, not a sorted set")
    return SetPage(found, total, cursor=int(cursor), examined=min(examined, total))


MAX_REF = 64
"""A jid longer than this (a corrupt or hostile payload) is named by its digest
instead: a token is in a link, a checkbox and a form per row."""


def short_ref(entry: api.Entry) -> str:
    """The entry's jid, or its digest when it has none or one too long to put in a page."""
    return entry.ref if len(entry.ref) <= MAX_REF else api.digest(entry.raw)


def ref_token(entry: api.Entry) -> str:
    """How a page names an entry to an action: its exact score, then ``short_ref``."""
    return f"{entry.score!r}~{short_ref(entry)}"


async def find_entries(
    redis: Redis, keys: Keys, which: api.SetName, refs: list[Ref]
) -> list[api.Entry]:
    """The entries named by ``ref_token`` tokens (read by ``params.entry_ref``), each
    found at its own score."""
    key = api.set_key(keys, which)
    found: list[api.Entry] = []
    for named in refs:
        try:
            rows: list[tuple[bytes, float]] = await redis.zrangebyscore(  # type: ignore[assignment]
                key, named.score, named.score, withscores=True
            )
        except ResponseError as exc:
            if not is_wrong_type(exc):
                raise
            return []
        for raw, at in rows:
            entry = api.parse_entry(raw, float(at))
            if short_ref(entry) == named.ref and entry not in found:
                found.append(entry)
    return found


@dataclass(frozen=True, slots=True)
class QueuePage:
    jobs: list[api.Entry]
    total: int
    problem: str | None = None


async def queue_page(
    redis: Redis, keys: Keys, queue: str, *, page: int, oldest_first: bool, size: int = PAGE_SIZE
) -> QueuePage:
    """One window of a queue: newest first from the left end, oldest first from the right."""
    key = keys.queue(queue)
    start = max(0, page - 1) * size
    async with redis.pipeline(transaction=False) as pipe:
        pipe.llen(key)
        if oldest_first:
            pipe.lrange(key, -(start + size), -(start + 1))
        else:
            pipe.lrange(key, start, start + size - 1)
        total, rows = await pipe.execute(raise_on_error=False)
    if isinstance(total, ResponseError) or isinstance(rows, ResponseError):
        return QueuePage([], 0, problem=await _mistyped(redis, key, "list", total))
    if oldest_first:
        rows.reverse()
    return QueuePage([api.parse_entry(raw, 0.0) for raw in rows], int(total))


async def delete_queued(redis: Redis, keys: Keys, queue: str, ref: str, near: int) -> bool:
    """Remove one job from ``queue``: the one named ``ref`` (``short_ref``) within a window
    around index ``near``.

    Looked for in a bounded window (jobs move towards the right end as others
    are taken), then removed by value (``LREM``, one copy).
    """
    key = keys.queue(queue)
    start = max(0, near - 2 * PAGE_SIZE)
    window: list[bytes] = await redis.lrange(key, start, near + 2 * PAGE_SIZE)  # type: ignore[assignment]
    for raw in window:
        if short_ref(api.parse_entry(raw, 0.0)) == ref:
            return await admin.remove_queued(redis, key, raw)
    return False


@dataclass(frozen=True, slots=True)
class RedisInfo:
    version: str = "?"
    memory: str = "?"
    clients: str = "?"
    problem: str | None = None


async def redis_info(redis: Redis) -> RedisInfo:
    """Version, memory and clients from ``INFO`` (a server that refuses it says why)."""
    try:
        info: dict[str, Any] = await redis.info()
    except ResponseError as exc:
        return RedisInfo(problem=str(exc))
    return RedisInfo(
        version=str(info.get("redis_version", "?")),
        memory=str(info.get("used_memory_human", "?")),
        clients=str(info.get("connected_clients", "?")),
    )


@dataclass(frozen=True, slots=True)
class History:
    days: list[str]
    processed: list[int]
    failed: list[int]
    problem: str | None = field(default=None)


def _count(value: object) -> int:
    try:
        return int(loose_text(value)) if isinstance(value, bytes | str) else 0
    except ValueError:
        return 0


async def history(redis: Redis, keys: Keys, *, days: int = HISTORY_DAYS) -> History:
    """Processed and failed per UTC day, oldest first (the per-day counters)."""
    today = int(time.time() // 86_400)
    names = [day_name(day) for day in range(today - days + 1, today + 1)]
    async with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.get(keys.stats_processed_on(name))
            pipe.get(keys.stats_failed_on(name))
        replies = await pipe.execute(raise_on_error=False)
    return History(
        days=names,
        processed=[_count(r) for r in replies[0::2]],
        failed=[_count(r) for r in replies[1::2]],
    )


def busy_count(procs: list[api.ProcessInfo]) -> int:
    """Jobs running now: the busy counts the live processes last beat (no extra read)."""
    return sum(p.busy or 0 for p in procs if p.alive)


async def busy_jobs(redis: Redis, keys: Keys, procs: list[api.ProcessInfo]) -> list[api.BusyJob]:
    """What the live ones of ``procs`` run now (``api.busy``, the processes read once)."""
    live = [p.identity for p in procs if p.alive]
    if not live:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for identity in live:
            pipe.hgetall(keys.workers(identity))
        replies = await pipe.execute(raise_on_error=False)
    jobs: list[api.BusyJob] = []
    for identity, reply in zip(live, replies, strict=True):
        if isinstance(reply, ResponseError):
            if not is_wrong_type(reply):
                raise reply
            continue  # a wrong-typed workers hash: the key guard will move it aside
        for slot, record in reply.items():
            jobs.append(busy_job(identity, loose_text(slot), record))
    jobs.sort(key=slot_order)
    return jobs


async def wrong_typed(redis: Redis, expected: dict[str, str]) -> str | None:
    """The first key of ``expected`` (key → the type it should be, as ``TYPE`` names it)
    that holds another type, said in a line; None when each is right or absent."""
    for key, kind in expected.items():
        found = text(await redis.type(key))
        if found not in (kind, "none"):
            return f"{key} holds a {found}, not a {TYPE_NAMES.get(kind, kind)}"
    return None


TYPE_NAMES = {"zset": "sorted set", "hash": "hash", "list": "list", "set": "set"}
