"""``current_job()``: what a handler may ask about the job it is running."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class JobContext:
    """The running job: its jid, name, queue, retry count and the whole payload."""

    jid: str
    name: str
    queue: str
    retry_count: int
    enqueued_at: float | None
    payload: dict[str, Any]


_current: ContextVar[JobContext | None] = ContextVar("cogworker_current_job", default=None)


def current_job() -> JobContext:
    """The job this handler runs for; ``RuntimeError`` outside a handler."""
    context = _current.get()
    if context is None:
        raise RuntimeError("current_job() called outside a running job")
    return context


def set_current(context: JobContext | None) -> None:
    _current.set(context)
