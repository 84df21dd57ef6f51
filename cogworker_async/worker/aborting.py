"""A running job's abort, inside its process: cancel the handler's await, or mark the job.

A job's phase decides (``RunningJob.phase``, set by the processor):

- before its handler starts (its lock being taken, the middleware's code
  before it): marked; the handler never starts, and the job is filed as
  aborted;
- while an ``async def`` handler is awaited: the processor's task is
  cancelled, and the cancellation lands in that await, because the task is
  suspended inside it whenever another task (the listener, the beat check)
  runs; the cancel is taken back (``uncancel``) once the handler has ended,
  however it ended, so it is never taken for a shutdown (a shutdown's own
  cancellation arriving too still wins). A plain ``def``'s thread can't be
  stopped: it is marked and filed as aborted when it returns;
- once the handler has returned or raised, the job is *finishing* (its ack,
  result, periodic record or failure filing on their way): an abort is too
  late and cancels nothing. A failure being filed still honours it: the
  client's tombstone turns the retry into an abort (``file.lua``).

So no abort ever cancels anything but a handler's own await, and no task is
cancelled for a job that is not in one. Kept apart from ``processor.py``,
which only asks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from cogworker_async.jobs import JobRegistry
from cogworker_async.worker.threads import cancelled_by_us

NOT_ABORTED, MARKED, CANCELLED = 0, 1, 2  # RunningJob.aborted
BEFORE_HANDLER, IN_HANDLER, FINISHING = 0, 1, 2  # RunningJob.phase


class Abortable(Protocol):
    """What an abort reads and sets of a running job. The processor's ``RunningJob``
    is one: this module decides and the processor only asks, so it imports nothing
    of the processor."""

    job: dict[str, Any] | None
    aborted: int
    phase: int


def abort_in(
    running: Mapping[int, Abortable],
    tasks: Mapping[int, asyncio.Task[Any]],
    registry: JobRegistry,
    jid: str,
    log: logging.Logger,
) -> bool:
    """Abort job ``jid`` if a processor runs it; True if one does (or did so already,
    or it is finishing: too late).

    In an ``async def``'s await, the processor's task is cancelled; before its
    handler, or in a plain ``def``'s thread, it is marked. Either is filed as
    aborted when it ends.
    """
    for slot, job_running in running.items():
        job = job_running.job
        if job is None or job.get("jid") != jid:
            continue
        if job_running.aborted:
            return True
        if job_running.phase == FINISHING:
            log.info("jid=%s %s: abort too late, its handler has returned", jid, job["class"])
            return True
        function = registry.get(job["class"])
        task = tasks.get(slot)
        if (
            job_running.phase == IN_HANDLER
            and function is not None
            and function.is_async
            and task is not None
        ):
            job_running.aborted = CANCELLED
            task.cancel("aborted")
            how = "cancelled"
        else:
            job_running.aborted = MARKED
            how = (
                "filed when its thread returns"
                if job_running.phase == IN_HANDLER
                else "its handler never starts"
            )
        log.info("jid=%s %s aborted while running: %s", jid, job["class"], how)
        return True
    return False


def ended_by_abort(
    job_running: Abortable, task: asyncio.Task[Any] | None, exc: BaseException | None
) -> bool:
    """An aborted job ended (``exc``: how, None if it returned): take back our cancel.

    False when a cancellation of ours (a shutdown) came too: that wins, and the
    job stays on the list for the shutdown's requeue.
    """
    if job_running.aborted == CANCELLED:
        job_running.aborted = MARKED  # cancelled once, taken back once
        if task is not None:
            task.uncancel()
    return exc is None or not cancelled_by_us(exc)
