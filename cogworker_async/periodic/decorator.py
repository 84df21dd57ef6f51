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
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from cogworker_async.jobs import JobFunction, RetryIn, RetryOption, job
from cogworker_async.periodic.entries import Entry, Misfire, cron, every

P = ParamSpec("P")
R = TypeVar("R")


class Periodic:
    """``@periodic(expression, ...)``, and ``entry``/``every``/``cron`` for entries of
    jobs declared elsewhere."""

    Entry = Entry
    entry = staticmethod(cron)
    cron = staticmethod(cron)
    every = staticmethod(every)

    def __call__(
        self,
        schedule: str | float,
        *,
        tz: str = "UTC",
        name: str | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        misfire: Misfire = "skip",
        grace: float | None = None,
        overlap: bool = True,
        queued_ttl: float = 3600.0,
        active_ttl: float = 3600.0,
        job_name: str | None = None,
        queue: str = "default",
        retry: RetryOption | None = None,
        timeout: float | None = None,
        retry_in: RetryIn | None = None,
        keep_result: float | None = None,
        status: bool | None = None,
    ) -> Callable[[Callable[P, R] | JobFunction[P, R]], JobFunction[P, R]]:
        """Make the function a job (as ``@job`` with ``job_name``, ``queue``, ``retry``,
        ``timeout``, ``retry_in``, ``keep_result``, ``status``) and declare its
        periodic entry: ``schedule`` is a cron expression (five fields, or six
        with a leading seconds field: ``"*/2 * * * * *"``) read in zone ``tz``,
        or a number of seconds (``every``). ``name`` names the entry (default:
        the job's name); the rest are ``cron``'s. Stacked on a ``@job``
        function, that job is used as it is (the job options here must then be
        left out). Checked here, at import: a bad expression or zone raises."""
        job_options: dict[str, Any] = {
            "name": job_name,
            "retry": retry,
            "timeout": timeout,
            "retry_in": retry_in,
            "keep_result": keep_result,
            "status": status,
        }
        entry_options: dict[str, Any] = {
            "name": name,
            "args": args,
            "kwargs": kwargs,
            "misfire": misfire,
            "grace": grace,
            "overlap": overlap,
            "queued_ttl": queued_ttl,
            "active_ttl": active_ttl,
        }
        if isinstance(schedule, bool) or not isinstance(schedule, str | int | float):
            raise TypeError(f"@periodic takes a cron expression or seconds, got {schedule!r}")
        if not isinstance(schedule, str) and tz != "UTC":
            raise ValueError("tz applies to a cron expression, not to every(seconds)")

        def make(function: JobFunction[Any, Any]) -> Entry:
            if isinstance(schedule, str):
                return cron(schedule, function, tz=tz, **entry_options)
            return every(schedule, function, **entry_options)

        def declare(target: Callable[P, R] | JobFunction[P, R]) -> JobFunction[P, R]:
            if isinstance(target, JobFunction):
                given = [k for k, v in job_options.items() if v is not None]
                if given or queue != "default":
                    raise TypeError(
                        f"@periodic on the @job {target.name!r}: set {given or ['queue']} "
                        "in @job, not here"
                    )
                function = target
            else:
                options = {k: v for k, v in job_options.items() if v is not None}
                function = job(queue=queue, **options)(target)
            function.schedules = (*function.schedules, make(function))
            return function

        return declare

    def __getattr__(self, attribute: str) -> Any:
        # Anything else is the subpackage's: its submodules, ``__path__``...
        return getattr(importlib.import_module("cogworker_async.periodic"), attribute)


periodic = Periodic()
"""The decorator, with ``entry``/``every``/``cron``: see the module's docstring."""
