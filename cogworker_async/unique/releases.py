"""Deferred releases: a unique lock whose release failed is released later, never
left to its TTL.

Owned by one ``Worker`` (no module state). ``release`` tries at once; a failed
call (an outage, any error) keeps the lock in ``pending``, and the worker's
duty (``once``) tries every pending one again and drains what stopped workers
handed over. On shutdown ``hand_over`` pushes what is still pending onto
``<ns>:unique:~releases`` for the next worker to release. Every release is
owner-checked (``release_lock.lua``): releasing late never frees a newer copy's
lock.
"""

from __future__ import annotations

import logging

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.unique.lock import Release, releases_key

DRAIN_BATCH = 100  # handed-over releases taken per duty pass


class DeferredReleases:
    """Releases to make; the failed ones kept until they land."""

    def __init__(self, redis: Redis, keys: Keys, logger: logging.Logger) -> None:
        self._redis = redis
        self._keys = keys
        self._log = logger
        self.pending: dict[Release, None] = {}  # ordered, deduplicated
        self.released = 0

    async def release(self, release: Release) -> None:
        """Release now, or keep it pending; never raises (but cancellation)."""
        try:
            await commands.release_lock(self._redis, release.key, release.jid)
        except Exception as exc:  # noqa: BLE001 - any failure: the duty tries again
            if release not in self.pending:
                self._log.warning(
                    "jid=%s: could not release unique lock %s (%s): kept, tried again",
                    release.jid,
                    release.key,
                    type(exc).__name__,
                )
            self.pending[release] = None
        else:
            self.released += 1

    def defer(self, release: Release) -> None:
        """Keep a release for the duty (a path that cannot wait for Redis)."""
        self.pending[release] = None

    async def once(self) -> int:
        """One duty pass: retry the pending, then drain handed-over ones. Returns how
        many are still pending. Raises on a failed call (the duty helper logs it)."""
        for release in list(self.pending):
            await commands.release_lock(self._redis, release.key, release.jid)
            self.pending.pop(release, None)
            self.released += 1
        key = releases_key(self._keys)
        for _ in range(DRAIN_BATCH):
            raw = await self._redis.lpop(key)
            if raw is None:
                break
            handed = _parse(raw)
            if handed is None:
                self._log.error("unusable handed-over release dropped: %.200r", raw)
                continue
            # Popped: ours now. Kept in memory if this release fails.
            await self.release(handed)
        return len(self.pending)

    async def close(self) -> None:
        """On shutdown: one last try of each pending release, the rest handed over."""
        for release in list(self.pending):
            try:
                await commands.release_lock(self._redis, release.key, release.jid)
            except Exception:  # noqa: BLE001 - handed over below instead
                break
            self.pending.pop(release, None)
            self.released += 1
        await self.hand_over()

    async def hand_over(self) -> None:
        """On shutdown: push what is still pending for the next worker to release."""
        if not self.pending:
            return
        records = [orjson.dumps({"key": r.key, "jid": r.jid}) for r in self.pending]
        try:
            await self._redis.rpush(releases_key(self._keys), *records)
        except Exception as exc:  # noqa: BLE001 - nothing else left to try: say so
            self._log.error(
                "could not hand over %d unique-lock releases (%s): they expire with their TTL",
                len(records),
                exc,
            )
            return
        self.pending.clear()


def _parse(raw: object) -> Release | None:
    if not isinstance(raw, bytes | str):
        return None
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    key, jid = record.get("key"), record.get("jid")
    if isinstance(key, str) and isinstance(jid, str) and key and jid:
        return Release(key, jid)
    return None
