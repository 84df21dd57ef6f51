"""``@job``: handlers, their options, and the name → handler lookup of a worker."""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, TypeVar, overload

from cogworker_async.errors import ConfigurationError
from cogworker_async.settings import Settings, check_queue_name
from cogworker_async.unique.lock import UniqueKey, UniqueMode, check_unique

if TYPE_CHECKING:  # periodic.entries imports this module
    from cogworker_async.periodic.entries import Entry

P = ParamSpec("P")
R = TypeVar("R")

RetryOption = bool | int
Handler = Callable[..., Any]
RetryDecision = float | int | Literal["discard", "dead"] | None
RetryIn = Callable[[int, BaseException, dict[str, Any]], RetryDecision]
"""``retry_in(count, exc, job)``: seconds until the next try, ``"discard"``,
``"dead"``, or None for the default backoff."""


def check_timing(delay: float | None, at: datetime | float | None) -> None:
    """Refuse a ``delay`` or ``at`` that is no time: NaN, infinite, or a negative delay.

    An infinite one would park the job in the schedule forever, a NaN one is
    refused by Redis only when the job is written (a raw ``ResponseError``).
    """
    if delay is not None and at is not None:
        raise ValueError("give delay or at, not both")
    if delay is not None:
        if isinstance(delay, bool) or not isinstance(delay, int | float):
            raise TypeError(f"delay must be a number of seconds, got {type(delay).__name__}")
        if not (math.isfinite(delay) and delay >= 0):
            raise ValueError(
                f"delay must be a finite number of seconds, 0 or more (not negative, NaN "
                f"or infinite): got {delay}"
            )
    if at is not None and not isinstance(at, datetime):
        if isinstance(at, bool) or not isinstance(at, int | float):
            raise TypeError(f"at must be a datetime or an epoch timestamp, got {type(at).__name__}")
        if not math.isfinite(at):
            raise ValueError(f"at must be a finite epoch timestamp: got {at}")


def check_timeout(timeout: float | None) -> None:
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be positive and finite (seconds), got {timeout}")


def check_keep_result(keep_result: float | None) -> None:
    if keep_result is None:
        return
    if isinstance(keep_result, bool) or not isinstance(keep_result, int | float):
        raise TypeError(f"keep_result must be a number of seconds, got {keep_result!r}")
    if not (math.isfinite(keep_result) and keep_result > 0):
        raise ValueError(f"keep_result must be positive and finite (seconds), got {keep_result}")


@dataclass(frozen=True, slots=True)
class JobOptions:
    """Per-job options; ``None`` means "the default" (settings or the job's own)."""

    queue: str = "default"
    retry: RetryOption | None = None
    timeout: float | None = None
    delay: float | None = None
    at: datetime | float | None = None
    # Keep the handler's (JSON) return value this many seconds (``Client.result``).
    keep_result: float | None = None
    # Track ``<ns>:status:<jid>`` for this job (``Client.status``).
    status: bool | None = None
    # One job per lock key at a time (``unique/``): the mode, the lock's TTL
    # (``DEFAULT_UNIQUE_FOR`` when None) and what the key is a digest of.
    unique: UniqueMode | None = None
    unique_for: float | None = None
    unique_key: UniqueKey | None = None


def payload_options(options: JobOptions, settings: Settings) -> dict[str, Any]:
    """The options a payload carries (None values are left out of it).

    ``keep_result`` and ``status`` only for a job that asks (or by setting): a
    plain job's payload is what it was. An explicit ``status=False`` is carried
    too: it opts that job out of ``status_tracking``.
    """
    extra: dict[str, Any] = {"retry": options.retry, "timeout": options.timeout}
    keep_result = options.keep_result or settings.keep_result
    if keep_result:
        extra["keep_result"] = keep_result
    status = (settings.status_tracking or None) if options.status is None else options.status
    if status is not None:
        extra["status"] = status
    return extra


F = TypeVar("F", bound="JobFunction[Any, Any]")


@dataclass(frozen=True, slots=True)
class JobArgs(Generic[F]):
    """The arguments of one job for ``Client.enqueue_many``, checked by mypy against the
    job's signature: ``send_email.args("a@b.c", "hi")``.

    Typed by the job function itself (not its ParamSpec): mypy would join two
    jobs' parameter lists into one that fits both, where an invariant job
    type makes ``enqueue_many(send_email, [resize.args(...)])`` an error.
    """

    args: tuple[Any, ...]
    kwargs: dict[str, Any]


class JobFunction(Generic[P, R]):
    """A registered handler: call it directly, or enqueue it with ``Client.enqueue``."""

    def __init__(
        self,
        fn: Callable[P, R],
        name: str,
        options: JobOptions,
        retry_in: RetryIn | None = None,
    ) -> None:
        self.fn = fn
        self.name = name
        self.defaults = options
        # Periodic entries declared with ``@periodic`` on this job: a worker
        # given the job (or its module) ticks them.
        self.schedules: tuple[Entry, ...] = ()
        self.retry_in = retry_in
        self.is_async = inspect.iscoroutinefunction(fn)
        # Read on every job: does it keep a result or track its status by default?
        self.tracks = options.keep_result is not None or options.status is not None
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<job {self.name!r} queue={self.defaults.queue!r}>"

    def args(self, *args: P.args, **kwargs: P.kwargs) -> JobArgs[JobFunction[P, R]]:
        """One job's arguments for ``Client.enqueue_many``, type-checked like a call."""
        return JobArgs(args, kwargs)

    def options(
        self,
        *,
        queue: str | None = None,
        delay: float | None = None,
        at: datetime | float | None = None,
        retry: RetryOption | None = None,
        timeout: float | None = None,
        keep_result: float | None = None,
        status: bool | None = None,
        unique: UniqueMode | None = None,
        unique_for: float | None = None,
        unique_key: UniqueKey | None = None,
    ) -> BoundJob[P, R]:
        """This job with options for one enqueue (queue, delay/at, retry, timeout,
        keep_result, status, unique, unique_for, unique_key)."""
        check_timing(delay, at)
        check_unique(unique, unique_for, unique_key)
        check_timeout(timeout)
        check_keep_result(keep_result)
        if queue is not None:
            check_queue_name(queue)
        base = self.defaults
        merged = replace(
            base,
            queue=base.queue if queue is None else queue,
            delay=delay,
            at=at,
            retry=base.retry if retry is None else retry,
            timeout=base.timeout if timeout is None else timeout,
            keep_result=base.keep_result if keep_result is None else keep_result,
            status=base.status if status is None else status,
            unique=base.unique if unique is None else unique,
            unique_for=base.unique_for if unique_for is None else unique_for,
            unique_key=base.unique_key if unique_key is None else unique_key,
        )
        return BoundJob(self, merged)


@dataclass(frozen=True, slots=True)
class BoundJob(Generic[P, R]):
    """A job with the options of one enqueue (see ``JobFunction.options``)."""

    function: JobFunction[P, R]
    options: JobOptions

    @property
    def name(self) -> str:
        return self.function.name

    def args(self, *args: P.args, **kwargs: P.kwargs) -> JobArgs[JobFunction[P, R]]:
        """One job's arguments for ``Client.enqueue_many``, type-checked like a call."""
        return JobArgs(args, kwargs)


@overload
def job(fn: Callable[P, R], /) -> JobFunction[P, R]: ...


@overload
def job(
    *,
    name: str | None = None,
    queue: str = "default",
    retry: RetryOption | None = None,
    timeout: float | None = None,
    retry_in: RetryIn | None = None,
    keep_result: float | None = None,
    status: bool | None = None,
    unique: UniqueMode | None = None,
    unique_for: float | None = None,
    unique_key: UniqueKey | None = None,
) -> Callable[[Callable[P, R]], JobFunction[P, R]]: ...


def job(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    queue: str = "default",
    retry: RetryOption | None = None,
    timeout: float | None = None,
    retry_in: RetryIn | None = None,
    keep_result: float | None = None,
    status: bool | None = None,
    unique: UniqueMode | None = None,
    unique_for: float | None = None,
    unique_key: UniqueKey | None = None,
) -> JobFunction[P, R] | Callable[[Callable[P, R]], JobFunction[P, R]]:
    """Declare a job handler (``async def``, or a plain ``def`` run in a worker thread).

    The name defaults to ``module.qualname``; it is what travels in the payload's
    ``class`` field, so renaming a function needs ``name=`` to keep old jobs running.
    ``keep_result=seconds`` keeps its JSON return value for ``Client.result``;
    ``status=True`` tracks it in ``<ns>:status:<jid>`` for ``Client.status``.
    ``unique="until_executed"`` (or ``"until_executing"``) enqueues at most one
    job per key at a time: the key is a digest of (name, args, kwargs, queue),
    or of ``unique_key(*args, **kwargs)``; the lock lasts ``unique_for`` s at
    most (default ``DEFAULT_UNIQUE_FOR``, an hour) and is released when the job
    succeeds or fails for good (``until_executing``: when its run starts).
    """
    check_timeout(timeout)
    check_unique(unique, unique_for, unique_key)
    check_keep_result(keep_result)
    check_queue_name(queue)

    def wrap(target: Callable[P, R]) -> JobFunction[P, R]:
        job_name = name or f"{target.__module__}.{target.__qualname__}"
        options = JobOptions(
            queue=queue,
            retry=retry,
            timeout=timeout,
            keep_result=keep_result,
            status=status,
            unique=unique,
            unique_for=unique_for,
            unique_key=unique_key,
        )
        function = JobFunction(target, job_name, options, retry_in)
        _declared[job_name] = function
        return function

    if fn is not None:
        return wrap(fn)
    return wrap


# Every @job declared in this process, by name: how a client that imported a
# job's module enqueues it by name with the job's own options (its queue, its
# retry), as if it had been given the function. The last declaration of a name
# wins; a worker's own JobRegistry is what decides what it runs.
_declared: dict[str, JobFunction[Any, Any]] = {}


def declared(name: str) -> JobFunction[Any, Any] | None:
    """The ``@job`` of that name declared (imported) in this process, if any."""
    return _declared.get(name)


JobSpec = JobFunction[Any, Any] | ModuleType | str
"""What ``Worker(jobs=[...])`` takes: a ``@job`` function, a module (every
``@job`` in it), or a dotted module name (imported)."""


class JobRegistry:
    """Name → handler for one worker, built from job functions, modules and module names."""

    def __init__(self, jobs: Iterable[JobSpec] | JobSpec = ()) -> None:
        self._by_name: dict[str, JobFunction[Any, Any]] = {}
        # One given alone, not in a list (a string would iterate as letters).
        items: Iterable[object] = (
            jobs if isinstance(jobs, Iterable) and not isinstance(jobs, str) else [jobs]
        )
        for item in items:
            if isinstance(item, JobFunction):
                self.add(item)
            elif isinstance(item, ModuleType):
                self.add_jobs_of(item)
            elif isinstance(item, str):
                self.add_module(item)
            else:
                raise TypeError(
                    f"expected a @job function, a module or a module name, got {item!r}"
                )

    def add(self, function: JobFunction[Any, Any]) -> None:
        existing = self._by_name.get(function.name)
        if existing is not None and existing.fn is not function.fn:
            raise ConfigurationError(f"two different handlers are named {function.name!r}")
        self._by_name[function.name] = function

    def add_module(self, module_name: str) -> None:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigurationError(f"cannot import job module {module_name!r}: {exc}") from exc
        self.add_jobs_of(module)

    def add_jobs_of(self, module: ModuleType) -> None:
        """Every ``@job`` function found in ``module`` (an error if there is none)."""
        found = [v for v in vars(module).values() if isinstance(v, JobFunction)]
        if not found:
            raise ConfigurationError(f"module {module.__name__!r} defines no @job functions")
        for function in found:
            self.add(function)

    def get(self, name: str) -> JobFunction[Any, Any] | None:
        return self._by_name.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._by_name)

    @property
    def schedules(self) -> list[Entry]:
        """The periodic entries declared with ``@periodic`` on these jobs, by job name."""
        return [e for name in self.names for e in self._by_name[name].schedules]

    def __len__(self) -> int:
        return len(self._by_name)


AsyncHandler = Callable[..., Awaitable[Any]]
