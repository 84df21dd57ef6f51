"""Deferred releases: the unique-lock releases that are calls of their own
(``until_executing``'s at run start, a success in basic fetch mode, acks a
stopping worker could not send; a success's release otherwise rides in its
ack), and those that failed: released later, never left to the TTL.

Owned by one ``Worker`` (no module state). ``release`` tries at once, the
releases asked for in the same event-loop turn (jobs finishing together) sent
as one ``release_locks.lua`` call, one call in flight at a time; a failed call
(an outage, any error) keeps its locks in ``pending``, and the worker's
duty (``once``) tries every pending one again and drains what stopped workers
handed over. On shutdown ``hand_over`` pushes what is still pending onto
``<ns>:unique:~releases`` for the next worker to release. Every release is
owner-checked (``release_lock.lua``): releasing late never frees a newer copy's
lock.
"""

from __future__ import annotations

import asyncio
import logging

import orjson
from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.holds import is_held_key
from cogworker_async.keys import Keys
from cogworker_async.store import locks
from cogworker_async.unique.lock import Release, lock_prefix, releases_key
from cogworker_async.unique.renewals import LockRenewals

DRAIN_BATCH = 100  # handed-over releases taken per duty pass
BATCH_MAX = 500  # releases per release_locks.lua call


def _resolve(batch: list[tuple[Release, asyncio.Future[None]]]) -> None:
    for _, future in batch:
        if not future.done():
            future.set_result(None)


class DeferredReleases:
    """Releases to make; the failed ones kept until they land."""

    def __init__(self, redis: Redis, keys: Keys, logger: logging.Logger) -> None:
        self._redis = redis
        self._keys = keys
        self._log = logger
        self.lock_prefix = lock_prefix(keys)  # every unique lock is under it
        # Every release is of a hold under one of these (the kinds of holds/).
        self.prefixes = [kind.prefix(keys) for kind in holds.KINDS.values()]
        # The run-start renewals: the other lock call a unique job's start makes.
        self.renewals = LockRenewals(redis, logger)
        self.pending: dict[Release, None] = {}  # ordered, deduplicated
        self.released = 0
        self._batch: list[tuple[Release, asyncio.Future[None]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def release(self, release: Release) -> None:
        """Release now (coalesced with others asked for meanwhile), or keep it
        pending; returns once it was sent; never raises (but cancellation)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._batch.append((release, future))
        if self._flushing is None:
            # From the next loop turn: every release asked for in this one rides along.
            self._flushing = asyncio.get_running_loop().create_task(self._flush())
        await asyncio.shield(future)

    def release_soon(self, release: Release) -> None:
        """Release in the background (coalesced); a failure keeps it pending."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._batch.append((release, future))
        if self._flushing is None:
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        batch: list[tuple[Release, asyncio.Future[None]]] = []
        try:
            while self._batch:
                batch, self._batch = self._batch[:BATCH_MAX], self._batch[BATCH_MAX:]
                try:
                    await locks.release_locks(
                        self._redis, [(r.key, r.jid) for r, _ in batch], self.prefixes
                    )
                except Exception as exc:  # noqa: BLE001 - any failure: the duty tries again
                    self._keep([r for r, _ in batch], exc)
                else:
                    self.released += len(batch)
                _resolve(batch)
                batch = []
        finally:
            # Cancelled (the loop closing): what was not sent stays ours to retry
            # or hand over, and no caller is left waiting.
            left = [*batch, *self._batch]
            self._batch = []
            self._flushing = None
            for release, _ in left:
                self.pending[release] = None
            _resolve(left)

    def _keep(self, releases: list[Release], exc: Exception) -> None:
        fresh = [r for r in releases if r not in self.pending]
        if fresh:
            self._log.warning(
                "jid=%s: could not release %d unique lock(s) (%s): kept, tried again",
                fresh[0].jid,
                len(fresh),
                type(exc).__name__,
            )
        for release in releases:
            self.pending[release] = None

    def defer(self, release: Release) -> None:
        """Keep a release for the duty (a path that cannot wait for Redis)."""
        self.pending[release] = None

    async def once(self) -> int:
        """One duty pass: retry the pending, then drain handed-over ones. Returns how
        many are still pending. Raises on a failed call (the duty helper logs it)."""
        for release in list(self.pending):
            await locks.release_lock(self._redis, release.key, release.jid)
            self.pending.pop(release, None)
            self.released += 1
        key = releases_key(self._keys)
        for _ in range(DRAIN_BATCH):
            raw = await locks.take_handed_release(self._redis, key)
            if raw is None:
                break
            handed = _parse(raw)
            if handed is None or not any(is_held_key(handed.key, p) for p in self.prefixes):
                self._log.error("unusable handed-over release dropped: %.200r", raw)
                continue
            # Popped: ours now. Kept in memory if this release fails.
            await self.release(handed)
        return len(self.pending)

    async def close(self) -> None:
        """On shutdown: one last try of each pending release, the rest handed over."""
        if self._flushing is not None:
            # Releases still going out in the background: let them land (or fail
            # into pending). A wait, not an await: a timeout here must not cancel them.
            await asyncio.wait([self._flushing])
        for release in list(self.pending):
            try:
                await locks.release_lock(self._redis, release.key, release.jid)
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
            await locks.hand_over_releases(self._redis, releases_key(self._keys), records)
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
