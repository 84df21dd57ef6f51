"""Where a job is, by jid: a look in every place a job can be, at a bounded cost.

For people (the web UI's search box, a script): the scheduled, retry and dead
sets are scanned with ``MATCH`` on the jid, each queue read in windows, the
running jobs read from the live processes' ``workers`` hashes, and its status
(with the progress its handler reported) and kept result (if any) read by
their keys. Each set and the queues together examine at
most ``LOOKUP_WORK`` entries; past that ``complete`` is False and the answer
says where it stopped looking, never a scan of a million-entry set per search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.api._common import _glob_escape, _is_wrong_type
from cogworker_async.api.overview import queue_names
from cogworker_async.api.running import BusyJob, busy
from cogworker_async.api.sets import SET_NAMES, Entry, SetName, parse_entry, set_key
from cogworker_async.errors import StatusCorrupt
from cogworker_async.keys import Keys
from cogworker_async.lifecycle import Place, State, state_at
from cogworker_async.store.replies import loose_text
from cogworker_async.store.replies import raw as raw_bytes
from cogworker_async.store.results import expired
from cogworker_async.store.status import JobStatus, Progress, read_progress, read_status

LOOKUP_WORK = 20_000
"""Entries examined at most in each set, and in the queues together."""
SCAN_COUNT = 1000
QUEUE_WINDOW = 1000
JID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
"""What a jid looks like (ours are 24 hex digits; a producer's may differ)."""


@dataclass(frozen=True, slots=True)
class Found:
    """One place the job is: ``where`` is ``queue``, a set's name, ``running``,
    ``held`` (over a limit: ``queue`` is then the limit's key, ``index`` its
    place among the key's held jobs, 0 the newest) or ``after`` (waiting on
    other jobs: its status names them)."""

    where: str
    entry: Entry | None = None
    queue: str | None = None
    index: int | None = None
    running: BusyJob | None = None

    @property
    def state(self) -> State:
        """The job's lifecycle state there (``cogworker_async.lifecycle``)."""
        return state_at(_PLACES[self.where])


# ``Found.where`` -> the lifecycle's place of that name.
_PLACES: dict[str, Place] = {
    "queue": Place.QUEUE,
    "schedule": Place.SCHEDULE,
    "retry": Place.RETRY,
    "dead": Place.DEAD,
    "running": Place.IN_PROGRESS,
    "held": Place.HELD,
    "after": Place.AFTER,
}


@dataclass(frozen=True, slots=True)
class Lookup:
    jid: str
    found: list[Found]
    complete: bool
    """False when a set or the queues were too big to look through entirely."""
    unsearched: list[str] = field(default_factory=list)
    """Where the look stopped early (a set's key, ``queues``)."""
    result: dict[str, Any] | None = None
    """The kept result envelope (``{"ok": True, "value": ...}`` or the failure), if any."""
    result_expired: bool = False
    status: JobStatus | None = None
    """Its status hash (a job that tracks one), with its ``progress``; None if none is kept."""
    status_problem: str = ""
    """Why its status could not be read (a corrupt hash, left as found), or empty."""


def check_jid(jid: str) -> str:
    """``jid`` if it looks like one; ValueError naming it otherwise."""
    if not JID_PATTERN.fullmatch(jid):
        raise ValueError(f"not a jid: {jid[:80]!r} (1 to 64 letters, digits, _ . : -)")
    return jid


async def _in_set(redis: Redis, keys: Keys, which: SetName, jid: str) -> tuple[list[Found], bool]:
    key = set_key(keys, which)
    found: list[Found] = []
    cursor, examined = 0, 0
    try:
        while True:
            cursor, rows = await redis.zscan(
                key, cursor, match=f"*{_glob_escape(jid)}*", count=SCAN_COUNT
            )
            examined += SCAN_COUNT
            for raw, score in rows:
                entry = parse_entry(raw_bytes(raw), float(score))  # type: ignore[arg-type]
                if entry.jid == jid:
                    found.append(Found(which, entry=entry))
            if cursor == 0:
                return found, True
            if examined >= LOOKUP_WORK:
                return found, False
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        return found, True  # a wrong-typed set holds no job (the key guard moves it aside)


async def _in_queues(redis: Redis, keys: Keys, jid: str) -> tuple[list[Found], bool]:
    needle = jid.encode()
    found: list[Found] = []
    budget = LOOKUP_WORK
    for name in await queue_names(redis, keys):
        start = 0
        while budget > 0:
            try:
                window: list[bytes] = await redis.lrange(  # type: ignore[assignment]
                    keys.queue(name), start, start + min(QUEUE_WINDOW, budget) - 1
                )
            except ResponseError as exc:
                if not _is_wrong_type(exc):
                    raise
                break
            for offset, raw in enumerate(window):
                if needle in raw and parse_entry(raw, 0.0).jid == jid:
                    found.append(Found("queue", queue=name, index=start + offset))
            budget -= len(window)
            if len(window) < QUEUE_WINDOW:
                break
            start += len(window)
        if budget <= 0:
            return found, False
    return found, True


async def _held(redis: Redis, keys: Keys, jid: str) -> tuple[list[Found], bool]:
    """The job among the jobs held by a limit (``<ns>:limits:~parked:<key>``): the
    lists found by SCAN, each read in windows, every key SCAN passes and every
    entry read counted against ``LOOKUP_WORK``."""
    needle = jid.encode()
    found: list[Found] = []
    budget = LOOKUP_WORK
    prefix = keys.limit_parked("")
    cursor = 0
    while True:
        cursor, listed = await redis.scan(
            cursor, match=f"{_glob_escape(prefix)}*", count=SCAN_COUNT
        )
        budget -= SCAN_COUNT
        for key in listed:
            start = 0
            while budget > 0:
                try:
                    window: list[bytes] = await redis.lrange(  # type: ignore[assignment]
                        key, start, start + min(QUEUE_WINDOW, budget) - 1
                    )
                except ResponseError as exc:
                    if not _is_wrong_type(exc):
                        raise
                    break
                for offset, raw in enumerate(window):
                    if needle in raw and parse_entry(raw, 0.0).jid == jid:
                        name = loose_text(key)[len(prefix) :]
                        found.append(Found("held", queue=name, index=start + offset))
                budget -= len(window)
                if len(window) < QUEUE_WINDOW:
                    break
                start += len(window)
        if cursor == 0:
            return found, True
        if budget <= 0:
            return found, False


async def kept_result(redis: Redis, keys: Keys, jid: str) -> tuple[dict[str, Any] | None, bool]:
    """The job's kept result envelope (None if none), and whether one was kept but
    expired (either shape of ``store/results.py``: the marker, or a one-key
    envelope in its last ``gone_for`` s)."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.lindex(keys.result(jid), 0)
        pipe.exists(keys.result_gone(jid))
        pipe.pttl(keys.result(jid))
        kept, gone, pttl = await pipe.execute(raise_on_error=False)
    if isinstance(kept, bytes) and expired(kept, pttl):
        return None, True
    if isinstance(kept, bytes):
        try:
            envelope = orjson.loads(kept)
        except orjson.JSONDecodeError:
            envelope = {"ok": None, "unreadable": loose_text(kept)[:200]}
        return (envelope if isinstance(envelope, dict) else {"ok": None}), False
    return None, gone == 1


async def locate(redis: Redis, keys: Keys, jid: str) -> Lookup:
    """Every place job ``jid`` is now (queues, scheduled, retry, dead, running, held
    by a limit), its
    status and its kept result; ValueError if ``jid`` does not look like one."""
    check_jid(jid)
    found: list[Found] = []
    unsearched: list[str] = []
    queued, whole = await _in_queues(redis, keys, jid)
    found += queued
    if not whole:
        unsearched.append("queues")
    for which in SET_NAMES:
        in_set, whole = await _in_set(redis, keys, which, jid)
        found += in_set
        if not whole:
            unsearched.append(set_key(keys, which))
    found += [Found("running", running=job) for job in await busy(redis, keys) if job.jid == jid]
    held, whole = await _held(redis, keys, jid)
    found += held
    if await redis.hexists(keys.after_waiting, jid):
        found.append(Found("after"))
    if not whole:
        unsearched.append(keys.limit_parked("*"))
    result, expired = await kept_result(redis, keys, jid)
    status, problem = None, ""
    try:
        status = await read_status(redis, keys, jid)
    except StatusCorrupt as exc:  # said on the page; the rest of the answer still holds
        problem = str(exc)
    return Lookup(jid, found, not unsearched, unsearched, result, expired, status, problem)


BUSY_PROGRESS_MAX = 1000
"""Running jobs whose progress one call reads at most (one round trip)."""


async def progress_of(redis: Redis, keys: Keys, jids: list[str]) -> dict[str, Progress]:
    """The progress each of ``jids`` (running jobs) reported, by jid: those with none,
    or a status that can't be read, are left out; at most ``BUSY_PROGRESS_MAX``."""
    return await read_progress(redis, keys, jids[:BUSY_PROGRESS_MAX])
