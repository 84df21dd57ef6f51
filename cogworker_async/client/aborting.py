"""``Client.abort``: a waiting job never runs; a running one is cancelled by its process.

Looked for in the order a job moves (schedule and retry, then the queues, then
the processes' in-progress lists, then the unsettled list a stopping process
hands its unfiled failures to), so a job moving on during the search is met
again further on; a search that finds nothing is made once more before the
answer is "finished" or "not found". A waiting job is removed by the script
that finds it (``abort_entry.lua``; ``abort_unsettled.lua`` for a handed-over
failure, which files it as aborted and tells its waiters in the same step): it
never runs. A running one gets a
tombstone and a notification (``abort_running.lua``, which checks in the same
step that it is still on the list it was found on): the process running it
cancels it (an ``async def``) or files it as aborted when its thread returns
(a plain ``def``); one its stopping process hands over to the unsettled list
instead is filed as aborted by whoever files that record (``file_unsettled.lua``
reads the tombstone). "Finished" is known from what Redis still holds about the
job: its status, its kept result, its tombstone, or its dead entry; a job that
kept none of them is "not found" once it is done.
"""

from __future__ import annotations

import enum
import logging
import time
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import aborts, after, results
from cogworker_async.store.status_writes import write_status

_log = logging.getLogger("cogworker_async.client")

ABORTED_BEFORE_RUN = aborts.BEFORE_RUN
ABORTED_WHILE_RUNNING = aborts.WHILE_RUNNING
# Searches at most: one that finds nothing is made once more, and a job that left
# the in-progress list between being found there and being tombstoned is looked for
# again further on.
LOOKS = 3


class AbortOutcome(enum.StrEnum):
    """What ``Client.abort`` did."""

    # It was queued, scheduled, retrying or handed over unsettled: it will never run.
    REMOVED = "removed"
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
    # Waiting on others (after=[...]): taken off in one step, before any
    # prerequisite's end can push it onto a queue.
    waiting = await after.abort_waiting(redis, keys, jid, keep=aborts.TOMBSTONE_KEEP)
    if waiting is not None:
        await _record_removed(redis, keys, settings, jid, waiting)
        return AbortOutcome.REMOVED
    for _look in range(LOOKS):
        removed = await aborts.remove_waiting(redis, keys, jid, window=window)
        if removed is not None:
            await _record_removed(redis, keys, settings, jid, removed.entry)
            return AbortOutcome.REMOVED
        running = await aborts.find_running(redis, keys, jid)
        # Tombstoned only while still where it was found (one step): "cancelling"
        # then means every later settlement of it sees the tombstone.
        if running is not None and (
            await aborts.abort_running(redis, keys, jid, running) != aborts.MOVED_ON
        ):
            return AbortOutcome.CANCELLING
        # Handed over by a stopping process (its failure not filed yet): the
        # script that removes it also tells its waiters.
        if await aborts.remove_unsettled(redis, keys, jid, window=window) is not None:
            return AbortOutcome.REMOVED
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
            fields = {
                "state": "aborted",
                "class": str(job.get("class")),
                "queue": str(job.get("queue")),
                "finished_at": now,
                "updated_at": now,
            }
            await write_status(redis, keys, jid, fields, settings.status_ttl)
        keep = job.get("keep_result")
        if isinstance(keep, int | float) and not isinstance(keep, bool) and keep > 0:
            envelope = results.encode_failure(results.ABORTED, ABORTED_BEFORE_RUN)
            await results.store_result(redis, keys, jid, envelope, float(keep))
    except Exception as exc:  # noqa: BLE001 - best effort: the abort itself is done
        _log.warning("jid=%s aborted, but its status or result was not written: %s", jid, exc)
