"""``current_job()``: what a handler may ask about the job it is running (and
its ``progress()`` to report); and ``lifespan_state()``: what the worker's
lifespan yielded, typed.
"""

from __future__ import annotations

import logging
import math
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


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

    @property
    def batch(self) -> str | None:
        """The bid of the batch this job is a member of (None: none); add members to
        it while this job runs with ``client.batch_of(current_job().batch)``."""
        bid = self.payload.get("batch")
        return bid if isinstance(bid, str) else None

    @property
    def callback_batch(self) -> str | None:
        """The bid of the batch whose callback (``on_success``, ``on_complete``,
        ``on_death``) this job is (None: none); its members' results:
        ``batch_results()``."""
        callback = self.payload.get("batch_callback")
        bid = callback.get("bid") if isinstance(callback, dict) else None
        return bid if isinstance(bid, str) else None

    @property
    def state(self) -> Any:
        """What the worker's lifespan yielded (``RuntimeError`` if it has none).

        Typed ``Any``: ``lifespan_state(MyState)`` gives it back checked and typed.
        """
        return _lifespan_state()

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far this job is: ``fraction`` from 0 to 1, and an optional ``message``.

        Seen in ``client.status(jid)["progress"]``, ``cogworker-async status JID``
        and the web UI's job page. Safe from an ``async def`` and from a plain
        ``def`` (its thread); it never blocks and never fails the job: writes
        are coalesced (the latest value wins, at most ``PROGRESS_WRITES_PER_S``
        a second per job) and best-effort like every status write. A
        ``message`` longer than ``PROGRESS_MESSAGE_MAX`` characters is clipped.
        A job that tracks no status (``status=True``) keeps no progress: the
        call does nothing, and its worker warns once per job name.

        Raises ``TypeError`` or ``ValueError`` naming the argument when
        ``fraction`` is not a number from 0 to 1 or ``message`` is not a ``str``.
        """
        report_progress(self.jid, self.name, check_fraction(fraction), check_message(message))

    @classmethod
    def of(cls, job: dict[str, Any]) -> JobContext:
        """The context of a decoded payload."""
        return cls(
            job["jid"],
            job["class"],
            job["queue"],
            tries_before(job.get("retry_count")),
            job.get("enqueued_at"),
            job,
        )


def tries_before(last_failure: object) -> int:
    """Runs before this one, from the payload's index of its last failure."""
    if isinstance(last_failure, bool) or not isinstance(last_failure, int) or last_failure < 0:
        return 0
    return last_failure + 1


PROGRESS_MESSAGE_MAX = 200
"""Characters of a progress message kept; a longer one is clipped (never refused:
it is often built from data whose length the handler does not choose)."""
PROGRESS_WRITES_PER_S = 4
"""Progress writes a second per job at most: more calls are coalesced."""


def check_fraction(fraction: object) -> float:
    """``fraction`` as a float from 0 to 1; ``TypeError``/``ValueError`` naming it otherwise."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise TypeError(
            f"progress(fraction=...) takes a number from 0 to 1, not a {type(fraction).__name__}"
        )
    value = float(fraction)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"progress(fraction={fraction!r}): a number from 0 to 1 (0.4 is 40%)")
    return value


def check_message(message: object) -> str | None:
    """``message`` clipped to ``PROGRESS_MESSAGE_MAX``; ``TypeError`` naming it if not a str."""
    if message is None:
        return None
    if not isinstance(message, str):
        raise TypeError(
            f"progress(message=...) takes a str or None, not a {type(message).__name__}"
        )
    if len(message) > PROGRESS_MESSAGE_MAX:
        return message[: PROGRESS_MESSAGE_MAX - 1] + "\u2026"
    return message


class ProgressSink(Protocol):
    """Where a running job's progress goes (its worker's ``worker.progress.ProgressWriter``)."""

    def report(self, jid: str, fraction: float, message: str | None) -> None: ...


# jid -> the sink of the worker running it, for the jobs that track status: set
# when such a job starts, removed when it ends (a job that never reports pays
# one dict insert and one pop; an untracked job, nothing). A dict read is
# atomic, so a handler's thread may look here.
_progress_sinks: dict[str, ProgressSink] = {}
_warned_untracked: set[str] = set()
_log = logging.getLogger("cogworker_async.worker")


def register_progress(jid: str, sink: ProgressSink) -> None:
    _progress_sinks[jid] = sink


def unregister_progress(jid: str, sink: ProgressSink) -> None:
    if _progress_sinks.get(jid) is sink:
        del _progress_sinks[jid]


def report_progress(jid: str, name: str, fraction: float, message: str | None) -> None:
    sink = _progress_sinks.get(jid)
    if sink is not None:
        sink.report(jid, fraction, message)
    elif name not in _warned_untracked:
        _warned_untracked.add(name)
        _log.warning(
            "%s reports progress but tracks no status (or has ended): ignored (status=True: "
            "@job(status=True), .options(status=True) or the status_tracking setting)",
            name,
        )


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


# Set once per worker, in the worker's own task before its processors start:
# every processor task (and a sync handler's thread) inherits it, so a job pays
# nothing for it, and two workers in one process each see their own.
_NO_STATE: Any = object()
_state: ContextVar[Any] = ContextVar("cogworker_lifespan_state", default=_NO_STATE)


def _lifespan_state() -> Any:
    state = _state.get()
    if state is _NO_STATE:
        raise RuntimeError(
            "no lifespan state here: the worker was given no lifespan (Worker(lifespan=...), "
            "--lifespan module:attr), or this runs outside the worker's jobs"
        )
    return state


def lifespan_state(kind: type[T]) -> T:
    """What the worker's lifespan yielded, checked to be a ``kind``: typed for ``mypy --strict``.

    ``RuntimeError`` when the worker has no lifespan (or outside its jobs),
    ``TypeError`` when the state is not a ``kind``.
    """
    state = _lifespan_state()
    if not isinstance(state, kind):
        raise TypeError(
            f"the lifespan state is a {type(state).__module__}.{type(state).__qualname__}, "
            f"not a {kind.__module__}.{kind.__qualname__}"
        )
    return state


def set_lifespan_state(state: Any) -> Token[Any]:
    """Make ``state`` what this task (and the tasks it starts from now on) sees."""
    return _state.set(state)


def reset_lifespan_state(token: Token[Any]) -> None:
    _state.reset(token)


# What a worker lends the library's own jobs (a flow's step): its Redis client
# and keys, set once per worker in its own task (inherited as the lifespan
# state is), so a step enqueues through the worker's connection.
_services: ContextVar[Any] = ContextVar("cogworker_worker_services", default=None)


def set_worker_services(services: Any) -> Token[Any]:
    return _services.set(services)


def reset_worker_services(token: Token[Any]) -> None:
    _services.reset(token)


def worker_services() -> Any:
    """The running worker's (redis, keys); ``RuntimeError`` outside a worker's jobs."""
    services = _services.get()
    if services is None:
        raise RuntimeError("no worker here: a flow's step runs only as a worker's job")
    return services
