"""Abort, as Redis sees it: one typed wrapper per abort script, and the searches.

A waiting job is found in bounded steps (a window of a queue or of the
unsettled list per script call, ``ZSCAN`` with a ``MATCH`` on the jid for the
sorted sets) and removed by the same atomic script that checks it is still
there, so it never runs. A running one is asked for by a tombstone and a
notification (``abort_running.lua``); its process settles it
(``settle_aborted.lua``), or, when it was handed over to the unsettled list
instead, whoever files that record (``file_unsettled.lua`` reads the tombstone).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import orjson
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.errors import JobAborted
from cogworker_async.holds import Event, Hold
from cogworker_async.holds import block as holds_block
from cogworker_async.holds import kinds_spec as holds_spec
from cogworker_async.keys import Keys
from cogworker_async.lifecycle import FINISHED_STATUS_STRINGS
from cogworker_async.store.faults import is_wrong_type
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script

_log = logging.getLogger("cogworker_async.client")

TOMBSTONE_KEEP = 3600.0  # s a tombstone is kept (pruned by the next abort after)
WINDOW = 1000  # queue entries (or ZSCAN hint) looked at per call

# The result envelope's error of a job a script settles as aborted (its waiters
# read it as ``JobAborted``; store/results.py's ABORTED), and its messages.
ERROR_CLASS = JobAborted.__name__
BEFORE_RUN = "aborted before it ran"
WHILE_RUNNING = "aborted while it ran"


@dataclass(frozen=True, slots=True)
class Removed:
    """A waiting job removed by an abort: where from, and its payload."""

    source: str
    entry: bytes


def _holds(entry: bytes, jid: str) -> bool:
    """Is ``entry`` the job ``jid`` (its payload decoded, not a substring of its args)?"""
    try:
        decoded = orjson.loads(entry)
    except orjson.JSONDecodeError:
        return False
    return isinstance(decoded, dict) and decoded.get("jid") == jid


@dataclass(frozen=True, slots=True)
class EntryReply:
    """One ``abort_entry.lua`` call: the entry it removed, or where to look next."""

    removed: bytes | None
    next_start: int  # the next window's start in a queue; -1: nothing more to look at


async def abort_entry(
    redis: Redis,
    keys: Keys,
    *,
    source: str,
    jid: str,
    start: int = 0,
    window: int = WINDOW,
    member: bytes | None = None,
) -> EntryReply:
    """Remove job ``jid`` from ``source``: the exact sorted-set ``member`` given, or the
    first match in the queue window ``[start, start + window)``."""
    config = orjson.dumps(
        {
            "jid": jid,
            "now": time.time(),
            "keep": TOMBSTONE_KEEP,
            "start": start,
            "window": window,
            "holds": holds_spec(keys),
        }
    )
    args: list[EncodableArg] = [config] if member is None else [config, member]
    script_keys = [source, keys.aborted, keys.stat("aborted")]
    found, after = await script("abort_entry").run(redis, script_keys, args)
    if int(found) == 1:
        return EntryReply(bytes(after), -1)
    return EntryReply(None, int(after))


async def remove_waiting(
    redis: Redis, keys: Keys, jid: str, *, window: int = WINDOW
) -> Removed | None:
    """Remove job ``jid`` from wherever it waits (schedule, retry, a queue, held by a
    limit); None if none.

    A key of ours with the wrong type (the key guard's business) is passed over
    with one warning naming it: the job may wait in the next one."""
    for source in (keys.schedule, keys.retry):
        try:
            async for member in _zscan(redis, source, jid, window):
                reply = await abort_entry(redis, keys, source=source, jid=jid, member=member)
                if reply.removed is not None:
                    return Removed(source, reply.removed)
        except ResponseError as exc:
            _pass_over(source, exc)
    try:
        names = sorted(text(q) for q in await redis.smembers(keys.queues))
    except ResponseError as exc:
        _pass_over(keys.queues, exc)
        names = []
    sources = [keys.queue(name) for name in names]
    # Then the jobs held by a limit (a parked list per key: a job goes there
    # from a queue, so a job moving on meanwhile is met further on); looked
    # for only in a namespace that uses limits (no SCAN otherwise).
    try:
        if await redis.exists(keys.limits_used):
            sources += sorted(
                [text(k) async for k in redis.scan_iter(match=_held_pattern(keys), count=window)]
            )
    except ResponseError as exc:
        _pass_over(keys.limit_parked("*"), exc)
    for source in sources:
        start = 0
        try:
            while start >= 0:
                reply = await abort_entry(
                    redis, keys, source=source, jid=jid, start=start, window=window
                )
                if reply.removed is not None:
                    return Removed(source, reply.removed)
                start = reply.next_start
        except ResponseError as exc:
            _pass_over(source, exc)
    return None


def _held_pattern(keys: Keys) -> str:
    """SCAN's MATCH for every parked list of the namespace (its glob characters escaped)."""
    prefix = keys.limit_parked("")
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in prefix) + "*"


async def remove_unsettled(
    redis: Redis, keys: Keys, jid: str, *, window: int = WINDOW
) -> bytes | None:
    """Remove job ``jid`` from the unsettled list (a failure a stopping process handed
    over, not filed yet) as aborted; its payload, or None when it is not there.

    One ``abort_unsettled.lua`` call per window of the list, from its tail; the
    call that finds it also leaves its tombstone, releases its holds and tells
    its status and result waiters. A wrong-typed list is passed over with a
    warning naming it."""
    config = {
        "jid": jid,
        "now": 0.0,
        "keep": TOMBSTONE_KEEP,
        "start": 0,
        "window": window,
        "holds": holds_spec(keys),
        "prefix": keys.tracking_prefix,
        "error_class": ERROR_CLASS,
        "error_message": BEFORE_RUN,
    }
    script_keys = [keys.unsettled, keys.aborted, keys.stat("aborted"), keys.orphanings(jid)]
    start = 0
    try:
        while start >= 0:
            config["start"], config["now"] = start, time.time()
            found, after = await script("abort_unsettled").run(
                redis, script_keys, [orjson.dumps(config)]
            )
            if int(found) == 1:
                return bytes(after)
            start = int(after)
    except ResponseError as exc:
        _pass_over(keys.unsettled, exc)
    return None


def _pass_over(key: str, exc: ResponseError) -> None:
    """A wrong-typed key is skipped with one warning naming it; any other error is raised."""
    if not is_wrong_type(exc):
        raise exc
    _log.warning("abort: %s is not of the type it should be (WRONGTYPE): not searched", key)


async def _zscan(redis: Redis, key: str, jid: str, count: int) -> AsyncIterator[bytes]:
    """The members of sorted set ``key`` that are job ``jid``, by ``ZSCAN MATCH`` in steps."""
    cursor = 0
    while True:
        cursor, found = await redis.zscan(key, cursor, match=f"*{jid}*", count=count)
        for member, _score in found:
            if isinstance(member, bytes) and _holds(member, jid):
                yield member
        if cursor == 0:
            return


@dataclass(frozen=True, slots=True)
class RunningAt:
    """Where a running job was found: on an in-progress list (``listed``: the list's
    key and the entry as it is there), or in a basic-fetch process's workers hash
    (``listed`` None: no list to check again)."""

    listed: tuple[str, bytes] | None


async def find_running(redis: Redis, keys: Keys, jid: str) -> RunningAt | None:
    """Where job ``jid`` runs: on a process's in-progress list (reliable fetch), or in
    what a process without one (basic fetch) says it runs; None if nowhere.

    Both are short (a process's concurrency and prefetch). The workers hash is
    read only for a process without a list: it is rewritten once a beat, so
    it may still name a job that has just finished.
    """
    pipe = redis.pipeline(transaction=False)
    pipe.smembers(keys.in_progress_identities)
    pipe.smembers(keys.processes)
    listed, present = await pipe.execute()
    reliable = sorted(text(m) for m in listed)
    basic = sorted(text(m) for m in present if m not in listed)
    if not reliable and not basic:
        return None
    pipe = redis.pipeline(transaction=False)
    for identity in reliable:
        pipe.lrange(keys.in_progress(identity), 0, -1)
    for identity in basic:
        pipe.hvals(keys.workers(identity))
    needle = jid.encode()
    replies = await pipe.execute(raise_on_error=False)
    for i, reply in enumerate(replies):
        if isinstance(reply, Exception):
            continue  # a key of the wrong type: the key guard's business
        holds = _holds if i < len(reliable) else _runs
        for entry in reply:
            if needle in entry and holds(entry, jid):
                if i < len(reliable):
                    return RunningAt((keys.in_progress(reliable[i]), bytes(entry)))
                return RunningAt(None)
    return None


def _runs(work: bytes, jid: str) -> bool:
    """A workers-hash value (``{"payload": <the job's text>, ...}``) naming job ``jid``."""
    try:
        decoded = orjson.loads(work)
    except orjson.JSONDecodeError:
        return False
    job = decoded.get("payload") if isinstance(decoded, dict) else None
    return isinstance(job, str) and _holds(job.encode(), jid)


MOVED_ON = -2  # abort_running: the job had left the list it was found on


async def abort_running(redis: Redis, keys: Keys, jid: str, at: RunningAt | None = None) -> int:
    """Tombstone job ``jid`` and announce it; returns how many listeners heard it (-1:
    publishing was refused, the tombstone alone carries it, within a heartbeat).

    ``at``: where it was found. On a list, it is tombstoned only if it is still
    there, in the same step: ``MOVED_ON`` (no tombstone) when it has left (filed
    into retry, acked) since it was found, and the caller looks again."""
    args: list[EncodableArg] = [jid, time.time(), TOMBSTONE_KEEP, keys.aborts]
    script_keys = [keys.aborted]
    if at is not None and at.listed is not None:
        script_keys.append(at.listed[0])
        args.append(at.listed[1])
    return int(await script("abort_running").run(redis, script_keys, args))


_FINISHED = frozenset(s.encode() for s in FINISHED_STATUS_STRINGS)


async def finished(redis: Redis, keys: Keys, jid: str, *, window: int = WINDOW) -> bool:
    """Did job ``jid`` finish, as far as Redis still tells? Its status says so, its result
    was kept, it was aborted (a tombstone), or it lies in the dead set."""
    pipe = redis.pipeline(transaction=False)
    pipe.hget(keys.status(jid), "state")
    # A result of either shape (store/results.py): its list, or the marker beside it.
    pipe.exists(keys.result_gone(jid), keys.result(jid))
    pipe.zscore(keys.aborted, jid)
    state, gone, tombstone = await pipe.execute(raise_on_error=False)
    if isinstance(state, bytes) and state in _FINISHED:
        return True
    if gone is True or (isinstance(gone, int) and gone > 0) or isinstance(tombstone, float):
        return True
    try:
        async for _member in _zscan(redis, keys.dead, jid, window):
            return True
    except ResponseError as exc:
        _pass_over(keys.dead, exc)
    return False


async def settle_aborted(
    redis: Redis,
    keys: Keys,
    *,
    identity: str,
    raw: bytes,
    jid: str,
    holds: tuple[Hold, ...] = (),
    listed: bool = True,
) -> bool:
    """Settle a job this process aborted; False when it was no longer on the list.

    ``holds``: what the job holds (its unique lock, its periodic running lock,
    ...), settled owner-checked in the same step as each kind's abort rule
    says (an aborted job is done for good: released). ``listed``: False in basic fetch, where the
    job is on no list (nothing to look for)."""
    script_keys = [
        keys.in_progress(identity),
        keys.orphanings(jid),
        keys.stat("aborted"),
        keys.aborted,
    ]
    args: list[EncodableArg] = [raw, jid, time.time(), 1 if listed else 0]
    args.extend(holds_block(keys, holds, Event.ABORT))
    return bool(await script("settle_aborted").run(redis, script_keys, args))


async def tombstoned(redis: Redis, keys: Keys, jids: list[str]) -> list[str]:
    """Which of ``jids`` have a tombstone (one ``ZMSCORE``)."""
    if not jids:
        return []
    scores = await redis.zmscore(keys.aborted, jids)
    return [jid for jid, score in zip(jids, scores, strict=True) if score is not None]
