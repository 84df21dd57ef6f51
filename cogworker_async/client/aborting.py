"""``Client.abort``: a waiting job never runs; a running one is cancelled by its process.

Looked for in the order a job moves (schedule and retry, then the queues, then
the processes' in-progress lists), so a job moving on during the search is met
again further on; a search that finds nothing is made once more before the
answer is "finished" or "not found". A waiting job is removed by the script
that finds it (``abort_entry.lua``): it never runs. A running one gets a
tombstone and a notification (``abort_running.lua``): the process running it
cancels it (an ``async def``) or files it as aborted when its thread returns
(a plain ``def``). "Finished" is known from what Redis still holds about the
job: its status, its kept result, its tombstone, or its dead entry; a job that
kept none of them is "not found" once it is done.
"""

from __future__ import annotations

import enum
import logging
import math
import time
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.client import tracking
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import aborts

_log = logging.getLogger("cogworker_async.client")

ABORTED_BEFORE_RUN = "aborted before it ran"
ABORTED_WHILE_RUNNING = "aborted while it ran"


class AbortOutcome(enum.StrEnum):
    """What ``Client.abort`` did."""

    REMOVED = "removed"  # it was queued, scheduled or retrying: it will never run
    CANCELLING = "cancelling"  # it is running: its process cancels it and files it as aborted
    FINISHED = "finished"  # it has already finished (or was aborted before): nothing to do
    NOT_FOUND = "not_found"  # no such job, or one that finished and left no trace

    @property
    def aborted(self) -> bool:
        """Did this call stop the job (or ask its process to)?"""
        return self in (AbortOutcome.REMOVED, AbortOutcome.CANCELLING)


async def abort_job(
    redis: Redis, keys: Keys, settings: Settings, jid: str, *, window: int = aborts.WINDOW
) -> AbortOutcome:
    """Abort job ``jid`` (see the module's docstring); returns what was done."""
    for _look in range(2):
        removed = await aborts.remove_waiting(redis, keys, jid, window=window)
        if removed is not None:
            await _record_removed(redis, keys, settings, jid, removed.entry)
            return AbortOutcome.REMOVED
        if await aborts.find_running(redis, keys, jid):
            await aborts.abort_running(redis, keys, jid)
            return AbortOutcome.CANCELLING
    if await aborts.finished(redis, keys, jid, window=window):
        return AbortOutcome.FINISHED
    return AbortOutcome.NOT_FOUND


async def _record_removed(
    redis: Redis, keys: Keys, settings: Settings, jid: str, entry: bytes
) -> None:
    """Its status becomes ``aborted`` and its result waiters hear ``JobAborted``.

    Best effort: the job is already removed, which is what was asked.
    """
    try:
        job: Any = orjson.loads(entry)
    except orjson.JSONDecodeError:
        return
    if not isinstance(job, dict):
        return
    now = time.time()
    try:
        status_key = keys.status(jid)
        if job.get("status") or await redis.exists(status_key):
            pipe = redis.pipeline(transaction=False)
            pipe.hset(
                status_key,
                mapping={
                    "state": "aborted",
                    "class": str(job.get("class")),
                    "queue": str(job.get("queue")),
                    "finished_at": now,
                    "updated_at": now,
                },
            )
            pipe.expire(status_key, max(1, math.ceil(settings.status_ttl)))
            await pipe.execute()
        keep = job.get("keep_result")
        if isinstance(keep, int | float) and not isinstance(keep, bool) and keep > 0:
            envelope = tracking.encode_failure(tracking.ABORTED, ABORTED_BEFORE_RUN)
            await tracking.store_result(redis, keys, jid, envelope, float(keep))
    except Exception as exc:  # noqa: BLE001 - best effort: the abort itself is done
        _log.warning("jid=%s aborted, but its status or result was not written: %s", jid, exc)
