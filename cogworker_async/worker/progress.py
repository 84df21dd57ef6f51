"""A running job's ``current_job().progress(...)``: coalesced, best-effort status writes.

A handler may report thousands of times a second, from the loop or from its
thread; Redis sees at most ``PROGRESS_WRITES_PER_S`` writes a second per job,
each carrying the latest value (the ones in between are dropped: only the last
matters). A report only stores the value and, if no write is scheduled yet,
schedules one, so a report never blocks, never awaits Redis and never raises.
The writes go through the job's ``StatusWriter`` (bounded, failures logged once
per episode), each after the job's write before it, so they land in order; the
job's final status write takes the value still waiting, so the last progress
reported is the one its finished status keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from cogworker_async.context import PROGRESS_WRITES_PER_S, register_progress, unregister_progress
from cogworker_async.store.status import progress_fields

# s: the longest an end waits for a progress write in flight (a status write's
# own bound, store/status_writes.STATUS_WRITE_TIMEOUT).
LANDED_WAIT = 5.0

PROGRESS_INTERVAL = 1.0 / PROGRESS_WRITES_PER_S


class StatusWrites(Protocol):
    """What progress needs of ``store.status_writes.StatusWriter``: a background write."""

    def write(
        self, jid: str, fields: dict[str, Any], *, after: asyncio.Task[None] | None = None
    ) -> asyncio.Task[None] | None: ...


@dataclass(slots=True)
class _Reporting:
    """One running job's progress: what waits to be written, and its last write."""

    after: asyncio.Task[None] | None  # the job's last status write (each lands in order)
    pending: dict[str, Any] | None = None
    scheduled: bool = False  # a write of ``pending`` is scheduled on the loop
    last_sent: float = -math.inf  # monotonic; never: its first report is written at once
    timer: asyncio.TimerHandle | None = None


# What ``_jobs.get`` answers for a job that is not running here (ended, or never began).
_ENDED: Any = object()


class ProgressWriter:
    """The progress of one worker's running jobs (those that track status)."""

    def __init__(self, status: StatusWrites, interval: float = PROGRESS_INTERVAL) -> None:
        self._status = status
        self._interval = interval
        self._loop: asyncio.AbstractEventLoop | None = None  # the worker's, at the first job
        self._loop_thread = 0
        # Guards each _Reporting's pending/scheduled: a handler's thread reports too.
        self._lock = threading.Lock()
        # The running jobs that track status: None until a job reports (or has a
        # write of its own to land first), so one that never reports pays no
        # _Reporting. Changed under the lock (a handler's thread reports too).
        self._jobs: dict[str, _Reporting | None] = {}

    def begin(self, jid: str, working: asyncio.Task[None] | None) -> None:
        """A job that tracks status started; ``working``: its status write to land first."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
        self._jobs[jid] = None if working is None else _Reporting(working)
        register_progress(jid, self)

    def report(self, jid: str, fraction: float, message: str | None) -> None:
        """Keep the latest value; schedule its write unless one is already (any thread)."""
        fields = progress_fields(fraction, message, time.time())
        with self._lock:
            job = self._jobs.get(jid, _ENDED)
            if job is _ENDED:
                return  # it ended: its final status is written
            if job is None:  # its first report
                job = self._jobs[jid] = _Reporting(None)
            job.pending = fields
            if job.scheduled:
                return  # the scheduled write takes this value
            job.scheduled = True
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._kick(jid)
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: the worker is gone
            loop.call_soon_threadsafe(self._kick, jid)

    def _kick(self, jid: str) -> None:
        job = self._jobs.get(jid)
        if job is None or self._loop is None:
            return
        wait = job.last_sent + self._interval - time.monotonic()
        if wait > 0:
            job.timer = self._loop.call_later(wait, self._flush, jid)
        else:
            self._flush(jid)

    def _flush(self, jid: str) -> None:
        job = self._jobs.get(jid)
        if job is None:
            return
        with self._lock:
            fields, job.pending, job.scheduled, job.timer = job.pending, None, False, None
        if fields is None:
            return
        job.last_sent = time.monotonic()
        task = self._status.write(jid, fields, after=job.after)
        if task is not None:
            job.after = task

    def in_flight(self, jid: str) -> bool:
        """Is a progress write of the job's still in flight (``landed`` waits for it)?
        Asked first, so a job that reported none awaits no coroutine."""
        job = self._jobs.get(jid)
        return job is not None and job.after is not None and not job.after.done()

    async def landed(self, jid: str) -> None:
        """Wait (bounded) for the job's progress write still in flight, if any: an
        end that rides the ack would otherwise be overtaken by it, and an older
        value would stand beside ``complete``."""
        job = self._jobs.get(jid)
        if job is not None and job.after is not None and not job.after.done():
            await asyncio.wait([job.after], timeout=LANDED_WAIT)

    def finish(
        self, jid: str, after: asyncio.Task[None] | None
    ) -> tuple[asyncio.Task[None] | None, dict[str, Any] | None]:
        """The job ended: its last status write (``after`` if none of ours came later)
        and the progress still waiting, which its final write carries."""
        with self._lock:
            job = self._jobs.pop(jid, _ENDED)
            if job is None or job is _ENDED:
                pending = None
            else:
                pending, job.pending = job.pending, None
        if job is _ENDED:
            return after, None
        unregister_progress(jid, self)
        if job is None:  # it never reported
            return after, None
        if job.timer is not None:
            job.timer.cancel()
        return job.after, pending
