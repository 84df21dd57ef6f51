"""The running lock of ``overlap=False`` entries, kept by a server middleware.

``periodic_claim.lua`` takes the lock (value: the slot's jid, TTL
``lock_ttl``) in the step that pushes the job, and skips a slot while it is
held. This middleware, added by the worker only when one of its entries has
``overlap=False`` (plain jobs in a worker without such entries pay nothing),
re-takes it when the run starts (a run requeued by recovery or shutdown keeps
its jid, so it still owns the lock; one whose TTL ran out takes it again),
keeps it while a retry is pending, and releases it on success and on the last
failure. A failure that ``retry_in`` turns into dead/discard keeps it until its
TTL runs out.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.middleware import JobDict, Next, ServerMiddleware
from cogworker_async.periodic.entries import Entry
from cogworker_async.settings import Settings
from cogworker_async.store.scripts import script
from cogworker_async.worker.settlement import retry_limit


def overlap_middleware(
    redis: Redis, keys: Keys, settings: Settings, entries: Sequence[Entry]
) -> ServerMiddleware | None:
    locked = {e.name: e for e in entries if not e.overlap}
    if not locked:
        return None
    running = script("periodic_running")

    async def change(entry: Entry, jid: str, ttl: float | None) -> None:
        await running.run(
            redis,
            [keys.periodic(f"running:{entry.name}")],
            [jid, "" if ttl is None else int(ttl * 1000)],
        )

    async def guard(job: JobDict, call_next: Next) -> None:
        entry = locked.get(job.get("periodic"))  # type: ignore[arg-type]
        if entry is None:
            await call_next()
            return
        jid = str(job["jid"])
        await change(entry, jid, entry.lock_ttl)
        try:
            await call_next()
        except Exception:
            # (A cancellation, at shutdown, leaves the lock: the job is requeued
            # with its jid and re-takes it when it runs again.)
            limit = retry_limit(job, settings)
            count = int(job["retry_count"]) + 1 if isinstance(job.get("retry_count"), int) else 0
            terminal = limit is None or count >= limit
            await change(entry, jid, None if terminal else entry.lock_ttl)
            raise
        await change(entry, jid, None)

    return guard
