"""Unique-job locks (``<ns>:unique:<name>:<digest>``), listed and deleted by a human.

A stuck lock refuses every enqueue of its job until its TTL runs out. Locks
are released on every terminal path, so one outliving its job means a bug or
a lost release; ``delete_orphaned`` removes exactly those: locks whose holder
jid is nowhere (not queued, scheduled, retrying or in progress), each checked
and deleted in one atomic step (``delete_orphan_lock.lua``), so a lock whose
job moves while we look is kept.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis

from cogworker_async.api._common import _SCAN_COUNT, _glob_escape, _is_wrong_type, log
from cogworker_async.keys import Keys
from cogworker_async.store import locks
from cogworker_async.store.replies import loose_text as _loose_text
from cogworker_async.store.replies import text as _text
from cogworker_async.unique.lock import releases_key


@dataclass(frozen=True, slots=True)
class LockInfo:
    """One lock: its key, the job name it is for, the holder's jid, seconds left."""

    key: str
    name: str
    holder: str
    ttl: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _job_name(keys: Keys, key: str) -> str:
    rest = key[len(keys.unique("")) :]
    return rest.rsplit(":", 1)[0] if ":" in rest else ""


async def list_locks(redis: Redis, keys: Keys, *, name: str | None = None) -> list[LockInfo]:
    """Every unique lock (SCAN: never blocks Redis), by key; ``name``: one job's only."""
    prefix = keys.unique(f"{name}:" if name else "")
    pattern = _glob_escape(prefix) + "*"
    skip = releases_key(keys)
    seen = {_loose_text(raw) async for raw in redis.scan_iter(match=pattern, count=_SCAN_COUNT)}
    names = sorted(seen - {skip})
    if not names:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for key in names:
            pipe.get(key)
            pipe.pttl(key)
        replies = await pipe.execute(raise_on_error=False)
    found = []
    for i, key in enumerate(names):
        holder, pttl = replies[2 * i], replies[2 * i + 1]
        if not isinstance(holder, bytes | str):
            if isinstance(holder, Exception) and _is_wrong_type(holder):
                log.warning("%s is not a string, so not a lock: not listed, left alone", key)
            continue  # gone since the scan, or not a string: not a lock of ours
        ttl = pttl / 1000 if isinstance(pttl, int) and pttl >= 0 else None
        found.append(LockInfo(key, _job_name(keys, key), _text(holder), ttl))
    return found


async def delete_lock(redis: Redis, keys: Keys, key: str) -> bool:
    """Delete one lock by its full key (or the part after ``<ns>:unique:``)."""
    full = key if key.startswith(keys.unique("")) else keys.unique(key)
    if full == releases_key(keys):
        raise ValueError(f"{full} is not a lock")
    found = _text(await redis.type(full))
    if found not in ("string", "none"):
        raise ValueError(f"{full} holds a {found}, not a lock: left alone")
    return bool(await redis.delete(full))


async def delete_orphaned(redis: Redis, keys: Keys) -> list[LockInfo]:
    """Delete every lock whose holder jid is nowhere; returns the locks deleted."""
    deleted = []
    for lock in await list_locks(redis, keys):
        if await locks.delete_orphan_lock(redis, keys, lock=lock.key, holder=lock.holder):
            deleted.append(lock)
    return deleted
