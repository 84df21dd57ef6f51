"""Periodic entries declared in code: ``every(seconds, job, ...)`` and ``cron(expr, job, ...)``.

An entry is identified by its ``name``; a slot by the name and its time. The
hash of the whole definition (``digest``: what, when, where) is published for
``periodic list`` but is not part of a claim: two versions of an entry live at
once during a rolling deploy claim the same slots, so each runs once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from cogworker_async.job_options import carried_options, known_only
from cogworker_async.jobs import BoundJob, JobFunction
from cogworker_async.limits import payload_fields
from cogworker_async.periodic.declared import blame_the_declaration
from cogworker_async.periodic_entry import Entry, Misfire
from cogworker_async.timing import check_duration

__all__ = [
    "CronOptionArgs",
    "Entry",
    "EntryOptionArgs",
    "EveryOptionArgs",
    "Misfire",
    "cron",
    "every",
]


class EntryOptionArgs(TypedDict, total=False):
    """What a periodic entry takes beside its schedule and its job (``every``,
    ``cron``, ``@periodic``); left out or None: the default.

    - ``args``, ``kwargs``: the arguments of each run (none).
    - ``name``: the entry's name (the job's); no ``:`` in it.
    - ``misfire``: what a slot missed while no worker ticked does: ``"skip"`` it
      (the default) or ``"run_once"`` (the latest one runs, if at most ``grace`` s old).
    - ``overlap``: False skips a slot while the previous run is queued or running,
      held by a lock of ``queued_ttl`` s while the run waits and ``active_ttl`` s
      once it started (an hour each).
    """

    args: Sequence[Any]
    kwargs: Mapping[str, Any] | None
    name: str | None
    misfire: Misfire
    grace: float | None
    overlap: bool
    queued_ttl: float
    active_ttl: float


class EveryOptionArgs(EntryOptionArgs, total=False):
    """``every``'s: ``EntryOptionArgs`` and ``queue`` (default: the job's own)."""

    queue: str | None


class CronOptionArgs(EveryOptionArgs, total=False):
    """``cron``'s: ``EveryOptionArgs`` and ``tz``, the IANA zone the expression is
    read in (``UTC``)."""

    tz: str


ENTRY_OPTIONS = frozenset(EntryOptionArgs.__optional_keys__)
_EVERY_OPTIONS = frozenset(EveryOptionArgs.__optional_keys__)
_CRON_OPTIONS = frozenset(CronOptionArgs.__optional_keys__)


def _job_of(
    job: JobFunction[Any, Any] | BoundJob[Any, Any] | str,
) -> tuple[str, str | None, dict[str, Any]]:
    """The job's name, queue, and the options ``.options(...)`` set (None left out);
    its limits (``@job``'s own too) as the ``limits`` of its runs' payloads."""
    if isinstance(job, BoundJob):
        carried = carried_options(job.options)
        if job.options.limits:
            carried["limits"] = job.options.limits
        return job.name, job.options.queue, carried
    if isinstance(job, JobFunction):
        limits = job.defaults.limits
        return job.name, job.defaults.queue, ({"limits": limits} if limits else {})
    if isinstance(job, str):
        return job, None, {}
    raise TypeError(f"expected a @job function, its .options(...) or a job name, got {job!r}")


def _with_limits(
    carried: dict[str, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """``carried`` with its limits as a payload carries them (``limits`` and
    ``limit_slots``, every key resolved on the entry's arguments, once): the
    fetch holds each run like any enqueued job; a key that cannot be resolved
    is refused here, at the declaration."""
    limits = carried.pop("limits", None)
    if limits:
        carried.update(payload_fields(limits, args, kwargs))
    return carried


def _check(entry: Entry) -> Entry:
    """The one check of an entry's options (``every``, ``cron`` and ``@periodic``)."""
    if entry.misfire not in ("skip", "run_once"):
        raise ValueError(f"misfire must be 'skip' or 'run_once', got {entry.misfire!r}")
    if entry.grace is not None:
        check_duration(entry.grace, "grace", zero_ok=True)
    check_duration(entry.queued_ttl, "queued_ttl")
    check_duration(entry.active_ttl, "active_ttl")
    if not entry.name or ":" in entry.name:
        raise ValueError(f"a periodic entry needs a name without ':', got {entry.name!r}")
    return entry


def _entry(
    job: JobFunction[Any, Any] | BoundJob[Any, Any] | str,
    options: Mapping[str, Any],
    **schedule: Any,
) -> Entry:
    """What ``every`` and ``cron`` share: the job's name and queue, the Entry, checked."""
    given = {option: value for option, value in options.items() if value is not None}
    job_name, job_queue, carried = _job_of(job)
    args, kwargs = tuple(given.pop("args", ())), dict(given.pop("kwargs", {}))
    return _check(
        Entry(
            given.pop("name", None) or job_name,
            job_name,
            given.pop("queue", None) or job_queue or "default",
            args,
            kwargs,
            options=_with_limits(carried, args, kwargs),
            **given,
            **schedule,
        )
    )


@blame_the_declaration
def every(
    seconds: float,
    job: JobFunction[Any, Any] | BoundJob[Any, Any] | str,
    **options: Unpack[EveryOptionArgs],
) -> Entry:
    """Run ``job`` at every multiple of ``seconds`` since the Unix epoch (Redis's clock).
    The options are ``EveryOptionArgs``' (args, kwargs, name, queue, misfire, grace,
    overlap, queued_ttl, active_ttl)."""
    known_only(options, _EVERY_OPTIONS, "every()")
    check_duration(seconds, "every() seconds")
    return _entry(job, options, seconds=float(seconds))


@blame_the_declaration
def cron(
    expression: str,
    job: JobFunction[Any, Any] | BoundJob[Any, Any] | str,
    **options: Unpack[CronOptionArgs],
) -> Entry:
    """Run ``job`` at each time the cron ``expression`` matches in zone ``tz``
    (parsed by cronsim, which follows Debian cron's DST rules). The options are
    ``CronOptionArgs``' (``every``'s and ``tz``)."""
    known_only(options, _CRON_OPTIONS, "cron()")
    tz = options.get("tz") or "UTC"
    try:  # an unknown zone fails here rather than at the first tick
        zone = ZoneInfo(tz)
    except ZoneInfoNotFoundError:
        raise ValueError(f"unknown time zone {tz!r} (an IANA name: 'Europe/Berlin')") from None
    try:
        CronSim(expression, _start(0.0, zone))
    except CronSimError as exc:
        raise ValueError(f"bad cron expression {expression!r}: {exc}") from None
    return _entry(job, options, expression=expression)


def _start(now: float, zone: ZoneInfo) -> Any:
    from datetime import datetime

    return datetime.fromtimestamp(now, zone)
