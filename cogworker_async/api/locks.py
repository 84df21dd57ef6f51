"""Unique-job locks (``<ns>:unique:<name>:<digest>``), listed and deleted by a human.

A stuck lock refuses every enqueue of its job until its TTL runs out. Locks
are released on every terminal path, so one outliving its job means a bug or
a lost release; ``delete_orphaned`` removes exactly those: locks whose holder
jid is nowhere (not queued, scheduled, retrying or in progress), found in
chunked passes over the jobs (``unique/orphans.py``: linear, no Redis call
long) and deleted owner-checked, a chunk per call.

Every read is bounded: keys come from SCAN, values from pipelines of
``READ_CHUNK`` keys, and the web page reads one page (``list_locks_page``). A
holder that is not UTF-8 is shown with replacement characters but matched and
deleted by its exact bytes; a key under the prefix that is not a string is
named in a warning, never listed, and ``delete_lock`` moves it to quarantine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis

from cogworker_async.api._common import _SCAN_COUNT, _glob_escape, _is_wrong_type, log
from cogworker_async.keys import Keys
from cogworker_async.store import admin, guard, locks
from cogworker_async.store.replies import loose_text as _loose_text
from cogworker_async.store.replies import text as _text
from cogworker_async.unique.lock import releases_key
from cogworker_async.unique.orphans import DELETE_CHUNK, orphaned_holders

READ_CHUNK = 1000  # locks read (GET + PTTL) per pipeline
LOCKS_PAGE = 100  # locks per page of the web UI
PAGE_SCANS = 100  # SCAN calls a page makes at most (each of LOCKS_PAGE steps)


@dataclass(frozen=True, slots=True)
class LockInfo:
    """One lock: its key, the job name it is for, the holder's jid, seconds left."""

    key: str
    name: str
    holder: str
    ttl: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class LockPage:
    """One page of locks (by key) and the cursor of the next (0: this was the last)."""

    locks: list[LockInfo]
    cursor: int


def _job_name(keys: Keys, key: str) -> str:
    rest = key[len(keys.unique("")) :]
    return rest.rsplit(":", 1)[0] if ":" in rest else ""


def _pattern(keys: Keys, name: str | None) -> str:
    return _glob_escape(keys.unique(f"{name}:" if name else "")) + "*"


async def _read(redis: Redis, keys: Keys, names: Sequence[str]) -> list[tuple[LockInfo, bytes]]:
    """Each key's holder (as shown, and its exact bytes) and TTL; keys gone since the
    scan, and keys that are not strings (named in a warning), are left out."""
    found: list[tuple[LockInfo, bytes]] = []
    for start in range(0, len(names), READ_CHUNK):
        chunk = names[start : start + READ_CHUNK]
        async with redis.pipeline(transaction=False) as pipe:
            for key in chunk:
                pipe.get(key)
                pipe.pttl(key)
            replies = await pipe.execute(raise_on_error=False)
        for i, key in enumerate(chunk):
            holder, pttl = replies[2 * i], replies[2 * i + 1]
            if not isinstance(holder, bytes | str):
                if isinstance(holder, Exception) and _is_wrong_type(holder):
                    log.warning(
                        "%s is not a string, so not a lock: not listed "
                        "(`locks delete` moves it to quarantine)",
                        key,
                    )
                continue  # gone since the scan, or not a string: not a lock of ours
            exact = holder if isinstance(holder, bytes) else holder.encode()
            ttl = pttl / 1000 if isinstance(pttl, int) and pttl >= 0 else None
            found.append((LockInfo(key, _job_name(keys, key), _loose_text(holder), ttl), exact))
    return found


async def _all_keys(redis: Redis, keys: Keys, name: str | None = None) -> list[str]:
    skip = releases_key(keys)
    pattern = _pattern(keys, name)
    seen = {_loose_text(raw) async for raw in redis.scan_iter(match=pattern, count=_SCAN_COUNT)}
    return sorted(seen - {skip})


async def list_locks(redis: Redis, keys: Keys, *, name: str | None = None) -> list[LockInfo]:
    """Every unique lock (SCAN: never blocks Redis), by key; ``name``: one job's only."""
    return [info for info, _ in await _read(redis, keys, await _all_keys(redis, keys, name))]


async def list_locks_page(
    redis: Redis, keys: Keys, *, cursor: int = 0, count: int | None = None
) -> LockPage:
    """About ``count`` (default ``LOCKS_PAGE``) locks from SCAN cursor ``cursor``
    (0: the first page), by key within the page; the page's ``cursor`` goes on
    (0: no more). A page reads only its own locks, so it costs the same with
    100 locks or 100,000. SCAN may show a lock on two pages, never misses one
    that stays."""
    skip = releases_key(keys)
    pattern = _pattern(keys, None)
    count = LOCKS_PAGE if count is None else count
    names: set[str] = set()
    # SCAN steps of a page's size; in a keyspace where locks are sparse a page
    # may come short (its cursor still goes on) rather than scan it all.
    for _ in range(PAGE_SCANS):
        cursor, batch = await redis.scan(cursor, match=pattern, count=count)
        names.update(_loose_text(raw) for raw in batch)
        names.discard(skip)
        if cursor == 0 or len(names) >= count:
            break
    found = await _read(redis, keys, sorted(names))
    return LockPage([info for info, _ in found], int(cursor))


async def delete_lock(redis: Redis, keys: Keys, key: str) -> str:
    """Delete one lock by its full key (or the part after ``<ns>:unique:``).

    Returns what was done ("deleted <key>", or, for a key under the prefix that
    holds another type than a string, "moved <key> ... to <quarantine key>":
    kept there for a human, with a TTL); "" when there was no such key."""
    full = key if key.startswith(keys.unique("")) else keys.unique(key)
    if full == releases_key(keys):
        raise ValueError(f"{full} is not a lock")
    found = _text(await redis.type(full))
    if found not in ("string", "none"):
        moved = await guard.quarantine(redis, keys, key=full, expected="string")
        if moved is not None:
            log.warning("%s held a %s, not a lock: moved to %s", full, found, moved)
            return f"moved {full} (a {found}, not a lock) to {moved}"
    return f"deleted {full}" if await admin.delete_key(redis, full) else ""


async def delete_orphaned(redis: Redis, keys: Keys) -> list[LockInfo]:
    """Delete every lock whose holder jid is nowhere; returns the locks deleted.

    Linear and chunked: the locks are read once, the jobs twice (two passes,
    so a job moving while it is looked for is found by one), and the orphans
    deleted ``DELETE_CHUNK`` a call, each owner-checked."""
    held = await _read(redis, keys, await _all_keys(redis, keys))
    orphans = await orphaned_holders(redis, keys, {exact for _, exact in held})
    candidates = [(info, exact) for info, exact in held if exact in orphans]
    deleted: list[LockInfo] = []
    for start in range(0, len(candidates), DELETE_CHUNK):
        chunk = candidates[start : start + DELETE_CHUNK]
        done = await locks.delete_orphan_locks(redis, [(info.key, exact) for info, exact in chunk])
        deleted.extend(info for (info, _), gone in zip(chunk, done, strict=True) if gone)
    return deleted
