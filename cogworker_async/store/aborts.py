"""Abort, as Redis sees it: one typed wrapper per abort script, and the searches.

A waiting job is found in bounded steps (a window of a queue per script call,
``ZSCAN`` with a ``MATCH`` on the jid for the sorted sets) and removed by the
same atomic script that checks it is still there, so it never runs. A running
one is asked for by a tombstone and a notification (``abort_running.lua``);
its process settles it (``settle_aborted.lua``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.replies import text
from cogworker_async.store.scripts import EncodableArg, script

TOMBSTONE_KEEP = 3600.0  # s a tombstone is kept (pruned by the next abort after)
WINDOW = 1000  # queue entries (or ZSCAN hint) looked at per call


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
            "lock_prefix": keys.periodic_running_prefix,
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
    """Remove job ``jid`` from wherever it waits (schedule, retry, a queue); None if none."""
    for source in (keys.schedule, keys.retry):
        async for member in _zscan(redis, source, jid, window):
            reply = await abort_entry(redis, keys, source=source, jid=jid, member=member)
            if reply.removed is not None:
                return Removed(source, reply.removed)
    names = sorted(text(q) for q in await redis.smembers(keys.queues))
    for name in names:
        source = keys.queue(name)
        start = 0
        while start >= 0:
            reply = await abort_entry(
                redis, keys, source=source, jid=jid, start=start, window=window
            )
            if reply.removed is not None:
                return Removed(source, reply.removed)
            start = reply.next_start
    return None


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


async def find_running(redis: Redis, keys: Keys, jid: str) -> bool:
    """Is job ``jid`` on a process's in-progress list (reliable fetch), or in what a
    process without one (basic fetch) says it runs?

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
        return False
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
                return True
    return False


def _runs(work: bytes, jid: str) -> bool:
    """A workers-hash value (``{"payload": <the job's text>, ...}``) naming job ``jid``."""
    try:
        decoded = orjson.loads(work)
    except orjson.JSONDecodeError:
        return False
    job = decoded.get("payload") if isinstance(decoded, dict) else None
    return isinstance(job, str) and _holds(job.encode(), jid)


async def abort_running(redis: Redis, keys: Keys, jid: str) -> int:
    """Tombstone job ``jid`` and announce it; returns how many listeners heard it (-1:
    publishing was refused, the tombstone alone carries it, within a heartbeat)."""
    args: list[EncodableArg] = [jid, time.time(), TOMBSTONE_KEEP, keys.aborts]
    return int(await script("abort_running").run(redis, [keys.aborted], args))


async def finished(redis: Redis, keys: Keys, jid: str, *, window: int = WINDOW) -> bool:
    """Did job ``jid`` finish, as far as Redis still tells? Its status says so, its result
    was kept, it was aborted (a tombstone), or it lies in the dead set."""
    pipe = redis.pipeline(transaction=False)
    pipe.hget(keys.status(jid), "state")
    pipe.exists(keys.result_gone(jid))
    pipe.zscore(keys.aborted, jid)
    state, gone, tombstone = await pipe.execute(raise_on_error=False)
    if isinstance(state, bytes) and state in (b"complete", b"failed", b"dead", b"aborted"):
        return True
    if gone is True or (isinstance(gone, int) and gone > 0) or isinstance(tombstone, float):
        return True
    async for _member in _zscan(redis, keys.dead, jid, window):
        return True
    return False


async def settle_aborted(
    redis: Redis,
    keys: Keys,
    *,
    identity: str,
    raw: bytes,
    jid: str,
    lock: str = "",
    listed: bool = True,
) -> bool:
    """Settle a job this process aborted; False when it was no longer on the list.

    ``lock``: a lock the job holds (its unique lock or its periodic running
    lock, value = ``jid``), released owner-checked in the same step: an
    aborted job is done for good. ``listed``: False in basic fetch, where the
    job is on no list (nothing to look for)."""
    script_keys = [
        keys.in_progress(identity),
        keys.orphanings(jid),
        keys.stat("aborted"),
        keys.aborted,
    ]
    args: list[EncodableArg] = [raw, jid, time.time(), 1 if listed else 0]
    if lock:
        args.append(lock)
    return bool(await script("settle_aborted").run(redis, script_keys, args))


async def tombstoned(redis: Redis, keys: Keys, jids: list[str]) -> list[str]:
    """Which of ``jids`` have a tombstone (one ``ZMSCORE``)."""
    if not jids:
        return []
    scores = await redis.zmscore(keys.aborted, jids)
    return [jid for jid, score in zip(jids, scores, strict=True) if score is not None]
