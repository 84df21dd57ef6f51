"""``@job``: handlers, their options, and the name → handler lookup of a worker."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Generic, Literal, ParamSpec, TypeVar, Unpack, overload

from cogworker_async.errors import ConfigurationError
from cogworker_async.job_options import (
    JOB_OPTIONS,
    BacktraceOption,
    EnqueueOptionArgs,
    JobOptionArgs,
    JobOptions,
    RetryOption,
    RunOptionArgs,
    check_backtrace,
    check_keep_result,
    check_timeout,
    check_timing,
    known_only,
    payload_options,
)
from cogworker_async.periodic_entry import Entry
from cogworker_async.settings import check_job_name

# The options are declared in job_options.py; importable from here as before.
__all__ = [
    "AsyncHandler",
    "BacktraceOption",
    "BoundJob",
    "EnqueueOptionArgs",
    "Handler",
    "JobArgs",
    "JobFunction",
    "JobOptionArgs",
    "JobOptions",
    "JobRegistry",
    "JobSpec",
    "RetryDecision",
    "RetryIn",
    "RetryOption",
    "RunOptionArgs",
    "check_backtrace",
    "check_keep_result",
    "check_timeout",
    "check_timing",
    "declared",
    "job",
    "payload_options",
]

P = ParamSpec("P")
R = TypeVar("R")

Handler = Callable[..., Any]
RetryDecision = float | int | Literal["discard", "dead"] | None
RetryIn = Callable[[int, BaseException, dict[str, Any]], RetryDecision]
"""``retry_in(count, exc, job)``: seconds until the next try, ``"discard"``,
``"dead"``, or None for the default backoff."""


F = TypeVar("F", bound="JobFunction[Any, Any]")

# A JobFunction's signature not read yet (None is taken: "it has none").
_UNREAD = object()


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
    # The job these are for (``job.args(...)`` sets it): what a batch's callback
    # or a flow's step enqueues. None: built bare, for ``enqueue_many`` only.
    job: Any = field(default=None, compare=False)


def _positional_fit(signature: inspect.Signature | None) -> range:
    """The numbers of positional arguments (and no keywords) that bind to ``signature``."""
    if signature is None:
        return range(sys.maxsize)  # nothing to check against: anything goes
    low = high = 0
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            high = sys.maxsize - 1
        elif parameter.kind is inspect.Parameter.KEYWORD_ONLY:
            if parameter.default is inspect.Parameter.empty:
                return range(0)  # a required keyword: every call is bound
        elif parameter.kind is not inspect.Parameter.VAR_KEYWORD:
            high += 1
            if parameter.default is inspect.Parameter.empty:
                low += 1
    return range(low, high + 1)


def _bare(signature: inspect.Signature) -> str:
    """``(name, *, loud=False)``: the parameters without their annotations, for a message."""
    empty = inspect.Parameter.empty
    parameters = [p.replace(annotation=empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=parameters, return_annotation=empty))


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
        # Checked once here, not per enqueue: a by-name enqueue builds one of these too.
        self.name = check_job_name(name)
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
        # The handler's signature, read at the first enqueue (not at import):
        # _UNREAD until then, None when it has none (a builtin, some callables).
        self._signature: inspect.Signature | object | None = _UNREAD
        # How many positional arguments alone fit it (from its signature): a
        # call within them needs no bind. Empty until the signature is read.
        self._positional = range(0)

    def call_problem(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        """Why the handler cannot be called with ``args``/``kwargs`` (None if it can).

        A bind against its signature, never a call: a wrong number of arguments
        or an unknown keyword is caught at enqueue, not 25 retries later.
        """
        signature = self._signature
        if signature is _UNREAD:
            try:
                signature = inspect.signature(self.fn)
            except (TypeError, ValueError):  # why: no signature to check against
                signature = None
            self._signature = signature
            self._positional = _positional_fit(signature)
        if not isinstance(signature, inspect.Signature):
            return None
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            return f"{exc}; it takes {_bare(signature)}"
        return None

    def check_call(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Raise a TypeError naming the job if ``args``/``kwargs`` do not fit its handler."""
        if not kwargs and len(args) in self._positional:
            return  # the common call, without a bind (~1 µs a job at enqueue_many's pace)
        problem = self.call_problem(args, kwargs)
        if problem is not None:
            raise TypeError(f"job {self.name!r} cannot take these arguments: {problem}")

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<job {self.name!r} queue={self.defaults.queue!r}>"

    def args(self, *args: P.args, **kwargs: P.kwargs) -> JobArgs[JobFunction[P, R]]:
        """One job's arguments for ``Client.enqueue_many``, type-checked like a call
        (also a batch's callback, or a flow's step: it remembers the job)."""
        return JobArgs(args, kwargs, self)

    def options(self, **options: Unpack[EnqueueOptionArgs]) -> BoundJob[P, R]:
        """This job with options for one enqueue: any of ``EnqueueOptionArgs``
        (queue, delay/at, retry, timeout, keep_result, status, unique, unique_for,
        unique_key, backtrace, limits); one left out or None keeps the job's own."""
        return BoundJob(self, self.defaults.merged(options, f"{self.name}.options()"))


@dataclass(frozen=True, slots=True)
class BoundJob(Generic[P, R]):
    """A job with the options of one enqueue (see ``JobFunction.options``)."""

    function: JobFunction[P, R]
    options: JobOptions

    @property
    def name(self) -> str:
        return self.function.name

    def args(self, *args: P.args, **kwargs: P.kwargs) -> JobArgs[JobFunction[P, R]]:
        """One job's arguments for ``Client.enqueue_many``, type-checked like a call
        (also a batch's callback, or a flow's step: it remembers the job)."""
        return JobArgs(args, kwargs, self)


@overload
def job(fn: Callable[P, R], /) -> JobFunction[P, R]: ...


@overload
def job(
    *,
    name: str | None = None,
    retry_in: RetryIn | None = None,
    **options: Unpack[JobOptionArgs],
) -> Callable[[Callable[P, R]], JobFunction[P, R]]: ...


def job(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    retry_in: RetryIn | None = None,
    **options: Unpack[JobOptionArgs],
) -> JobFunction[P, R] | Callable[[Callable[P, R]], JobFunction[P, R]]:
    """Declare a job handler (``async def``, or a plain ``def`` run in a worker thread).

    The name defaults to ``module.qualname``; it is what travels in the payload's
    ``class`` field, so renaming a function needs ``name=`` to keep old jobs running.
    A name has at most ``MAX_JOB_NAME`` (1024) characters and a queue name at most
    ``MAX_QUEUE_NAME`` (255): a longer one is a ValueError here, as it is at enqueue.
    ``retry_in(count, exc, job)`` chooses when a failed run is tried again.

    The options are ``JobOptionArgs``' (each explained there): ``queue``,
    ``retry``, ``timeout``, ``keep_result``, ``status``, ``unique``,
    ``unique_for``, ``unique_key``, ``backtrace``. ``keep_result=seconds`` keeps
    its JSON return value for ``Client.result``; ``status=True`` tracks it in
    ``<ns>:status:<jid>`` for ``Client.status``. ``unique="until_executed"``
    (or ``"until_executing"``) enqueues at most one job per key at a time: the
    key is a digest of (name, args, kwargs, queue), or of
    ``unique_key(*args, **kwargs)``; the lock lasts ``unique_for`` s at most
    (default ``DEFAULT_UNIQUE_FOR``, an hour) and is released when the job
    succeeds or fails for good (``until_executing``: when its run starts).
    ``backtrace=False`` keeps no traceback in its retry and dead entries
    (``backtrace=N``: at most N frames; the log still has it).
    """
    known_only(options, JOB_OPTIONS, "@job")
    chosen: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    defaults = JobOptions(**chosen).check()

    def wrap(target: Callable[P, R]) -> JobFunction[P, R]:
        job_name = name or f"{target.__module__}.{target.__qualname__}"
        function = JobFunction(target, job_name, defaults, retry_in)
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
        self._builtin: dict[str, JobFunction[Any, Any]] = {}
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

    def add_builtin(self, function: JobFunction[Any, Any]) -> None:
        """A job of the library's own (a flow's step): run by every worker, not listed
        among the user's jobs (``names``, ``len``)."""
        self._builtin[function.name] = function

    def get(self, name: str) -> JobFunction[Any, Any] | None:
        found = self._by_name.get(name)
        return found if found is not None else self._builtin.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._by_name)

    @property
    def default_queues(self) -> dict[str, list[str]]:
        """Queue → the names of the jobs declared on it (``@job(queue=...)``), sorted."""
        by_queue: dict[str, list[str]] = {}
        for name in self.names:
            by_queue.setdefault(self._by_name[name].defaults.queue, []).append(name)
        return by_queue

    @property
    def schedules(self) -> list[Entry]:
        """The periodic entries declared with ``@periodic`` on these jobs, by job name."""
        return [e for name in self.names for e in self._by_name[name].schedules]

    def __len__(self) -> int:
        return len(self._by_name)


AsyncHandler = Callable[..., Awaitable[Any]]
