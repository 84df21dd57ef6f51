"""``current_job()``: what a handler may ask about the job it is running."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class JobContext:
    """The running job: its jid, name, queue, which try this is, and the whole payload.

    ``retry_count`` is 0 on the first run, 1 on the first retry, and so on. (The
    payload's own ``retry_count`` keeps Sidekiq's meaning, the index of the
    last failure: absent before the first failure, 0 after it.)
    """

    jid: str
    name: str
    queue: str
    retry_count: int
    enqueued_at: float | None
    payload: dict[str, Any]

    @classmethod
    def of(cls, job: dict[str, Any]) -> JobContext:
        """The context of a decoded payload."""
        return cls(
            job["jid"],
            job["class"],
            job["queue"],
            _tries_before(job.get("retry_count")),
            job.get("enqueued_at"),
            job,
        )


def _tries_before(last_failure: object) -> int:
    """Runs before this one, from the payload's index of its last failure."""
    if isinstance(last_failure, bool) or not isinstance(last_failure, int) or last_failure < 0:
        return 0
    return last_failure + 1


# The processor stores only the decoded payload (one ContextVar.set per job);
# the JobContext is built when a handler asks, so jobs that never ask pay nothing.
_current: ContextVar[dict[str, Any] | None] = ContextVar("cogworker_current_job", default=None)


def current_job() -> JobContext:
    """The job this handler runs for; ``RuntimeError`` outside a handler."""
    job = _current.get()
    if job is None:
        raise RuntimeError("current_job() called outside a running job")
    return JobContext.of(job)


def set_current(job: dict[str, Any] | None) -> None:
    """Make ``job`` (a decoded payload) what ``current_job()`` answers in this task."""
    _current.set(job)
