"""What a processor runs now: the job, its phase and whether it was aborted."""

from __future__ import annotations

from typing import Any

from cogworker_async.worker.aborting import BEFORE_HANDLER, NOT_ABORTED


class RunningJob:
    """What a processor runs now (its raw bytes are how it is known on the list).

    ``aborted``: MARKED (filed as aborted when it ends: its handler never
    starts, or a plain ``def``'s thread runs on) or CANCELLED (its handler's
    await was cancelled). ``phase``: BEFORE_HANDLER, IN_HANDLER (an ``async
    def``'s handler is being awaited: the one moment an abort cancels), or
    FINISHING (its handler returned or raised: its settlement is on its way,
    and an abort is too late; see ``aborting.py``).
    """

    __slots__ = ("aborted", "job", "phase", "raw", "started")

    def __init__(self, raw: bytes, job: dict[str, Any] | None, started: float) -> None:
        self.raw = raw
        self.job = job
        self.started = started
        self.aborted = NOT_ABORTED
        self.phase = BEFORE_HANDLER
