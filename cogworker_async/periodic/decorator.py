"""``@periodic(...)``: a job that is also a periodic entry, declared in one place.

    from cogworker_async import periodic

    @periodic("*/5 * * * *", tz="Europe/Berlin", overlap=False)
    async def sync() -> None: ...

    @periodic(30)                      # a number: every 30 s (``every``)
    async def refresh() -> None: ...

    Worker(settings, jobs=[sync, refresh])      # or their module: the entries come along

``periodic`` is one object, so both names SPEC §3 uses work: ``@periodic(...)``
and ``periodic.entry(...)`` (also ``periodic.every``, ``periodic.cron``,
``periodic.Entry``). Why an object: ``cogworker_async.periodic`` is also this
subpackage, and a module can't be called; the package binds the name to the
object, which hands any other attribute (a submodule) on to the subpackage,
so ``cogworker_async.periodic.entries`` still resolves.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar, Unpack

from cogworker_async.job_options import RUN_OPTIONS, RunOptionArgs, known_only
from cogworker_async.jobs import JobFunction, RetryIn, job
from cogworker_async.limits import Limit
from cogworker_async.periodic.declared import blame_the_declaration
from cogworker_async.periodic.entries import (
    ENTRY_OPTIONS,
    Entry,
    EntryOptionArgs,
    cron,
    every,
)

P = ParamSpec("P")
R = TypeVar("R")


class PeriodicOptionArgs(EntryOptionArgs, RunOptionArgs, total=False):
    """``@periodic``'s options: the entry's (``EntryOptionArgs``: ``name`` is the
    entry's) and the job's (``RunOptionArgs``), each declared once there, and
    the job's ``limits`` (``JobOptionArgs``): each run is held as an enqueued
    job would be."""

    limits: Sequence[Limit] | None


# The job options @periodic takes: how a job runs, and its limits.
_JOB_OPTIONS = RUN_OPTIONS | {"limits"}


class Periodic:
    """``@periodic(expression, ...)``, and ``entry``/``every``/``cron`` for entries of
    jobs declared elsewhere."""

    Entry = Entry
    entry = staticmethod(cron)
    cron = staticmethod(cron)
    every = staticmethod(every)

    @blame_the_declaration
    def __call__(
        self,
        schedule: str | float,
        *,
        tz: str = "UTC",
        job_name: str | None = None,
        retry_in: RetryIn | None = None,
        **options: Unpack[PeriodicOptionArgs],
    ) -> Callable[[Callable[P, R] | JobFunction[P, R]], JobFunction[P, R]]:
        """Make the function a job (as ``@job`` with ``job_name``, ``retry_in`` and the
        job options, ``RunOptionArgs``: ``queue``, ``retry``, ``timeout``,
        ``keep_result``, ``status``, ``backtrace``, and ``limits``) and declare its periodic
        entry: ``schedule`` is a cron expression (five fields, or six with a
        leading seconds field: ``"*/2 * * * * *"``) read in zone ``tz``, or a
        number of seconds (``every``). ``name`` names the entry (default: the
        job's name); the rest are ``cron``'s (``EntryOptionArgs``). Stacked on
        a ``@job`` function, that job is used as it is (the job options here
        must then be left out). Checked here, at import: a bad expression or
        zone raises."""
        known_only(options, ENTRY_OPTIONS | _JOB_OPTIONS, "@periodic")
        entry_options: dict[str, Any] = {k: v for k, v in options.items() if k in ENTRY_OPTIONS}
        job_options: dict[str, Any] = {
            k: v for k, v in options.items() if k in _JOB_OPTIONS and v is not None
        }
        if isinstance(schedule, bool) or not isinstance(schedule, str | int | float):
            raise TypeError(f"@periodic takes a cron expression or seconds, got {schedule!r}")
        if not isinstance(schedule, str) and tz != "UTC":
            raise ValueError("tz applies to a cron expression, not to every(seconds)")

        def make(function: JobFunction[Any, Any]) -> Entry:
            if isinstance(schedule, str):
                return cron(schedule, function, tz=tz, **entry_options)
            return every(schedule, function, **entry_options)

        @blame_the_declaration
        def declare(target: Callable[P, R] | JobFunction[P, R]) -> JobFunction[P, R]:
            if isinstance(target, JobFunction):
                # queue="default" was the parameter's default: not a choice made here.
                given = [k for k, v in job_options.items() if (k, v) != ("queue", "default")]
                if job_name is not None or retry_in is not None:
                    given = ["job_name" if job_name is not None else "retry_in", *given]
                if given:
                    raise TypeError(
                        f"@periodic on the @job {target.name!r}: set {given} in @job, not here"
                    )
                function = target
            else:
                function = job(name=job_name, retry_in=retry_in, **job_options)(target)
            function.schedules = (*function.schedules, make(function))
            return function

        return declare

    def __getattr__(self, attribute: str) -> Any:
        # Anything else is the subpackage's: its submodules, ``__path__``...
        return getattr(importlib.import_module("cogworker_async.periodic"), attribute)


periodic = Periodic()
"""The decorator, with ``entry``/``every``/``cron``: see the module's docstring."""
