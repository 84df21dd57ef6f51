"""A running job's abort, inside its process: cancel an ``async def``, mark a plain ``def``.

The processor's task is cancelled for the job it runs (``Task.cancel``, no
per-job cancel scope: a job never aborted pays nothing), and the cancel is
taken back (``uncancel``) once the job has ended, however it ended, so it is
never taken for a shutdown; a shutdown's own cancellation arriving too still
wins. A plain ``def``'s thread can't be stopped: it is marked and filed as
aborted when it returns. Kept apart from ``processor.py``, which only asks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cogworker_async.jobs import JobRegistry
from cogworker_async.worker.threads import cancelled_by_us

if TYPE_CHECKING:
    from cogworker_async.worker.processor import RunningJob

NOT_ABORTED, MARKED, CANCELLED = 0, 1, 2  # RunningJob.aborted


def abort_in(
    running: Mapping[int, RunningJob],
    tasks: Mapping[int, asyncio.Task[Any]],
    registry: JobRegistry,
    jid: str,
    log: logging.Logger,
) -> bool:
    """Abort job ``jid`` if a processor runs it; True if one does (or did so already).

    An ``async def`` is cancelled in its processor's task; a plain ``def`` (its
    thread can't be stopped), or a job without a handler, is marked. Either is
    filed as aborted when it ends. Too late once it is settling.
    """
    for slot, job_running in running.items():
        job = job_running.job
        if job is None or job.get("jid") != jid:
            continue
        if job_running.aborted or job_running.settling:
            return True
        function = registry.get(job["class"])
        task = tasks.get(slot)
        if function is not None and function.is_async and task is not None:
            job_running.aborted = CANCELLED
            task.cancel("aborted")
        else:
            job_running.aborted = MARKED
        log.info(
            "jid=%s %s aborted while running: %s",
            jid,
            job["class"],
            "cancelled" if job_running.aborted == CANCELLED else "filed when its thread returns",
        )
        return True
    return False


def ended_by_abort(
    job_running: RunningJob, task: asyncio.Task[Any] | None, exc: BaseException | None
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
