"""``current_job()``: what a handler may ask about the job it is running; and
``lifespan_state()``: what the worker's lifespan yielded, typed.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, TypeVar

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
    def state(self) -> Any:
        """What the worker's lifespan yielded (``RuntimeError`` if it has none).

        Typed ``Any``: ``lifespan_state(MyState)`` gives it back checked and typed.
        """
        return _lifespan_state()

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
