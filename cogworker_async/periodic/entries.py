"""Periodic entries declared in code: ``every(seconds, job, ...)`` and ``cron(expr, job, ...)``.

An entry is identified by its ``name`` and a hash of its definition (what,
when, where): the claim keys carry both, so changing an entry's expression
(or arguments, queue, zone) makes a new schedule and the old one stops being
claimed as soon as every live process runs the new code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from zoneinfo import ZoneInfo

import orjson
from cronsim import CronSim, CronSimError

from cogworker_async.jobs import BoundJob, JobFunction

Misfire = Literal["skip", "run_once"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One periodic entry. Build it with ``every`` or ``cron``."""

    name: str
    job: str
    queue: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    seconds: float | None = None  # every(...)
    expression: str | None = None  # cron(...)
    tz: str = "UTC"
    misfire: Misfire = "skip"
    grace: float | None = None  # run_once: the latest missed slot runs only if at most this old
    overlap: bool = True  # False: a slot is skipped while the previous run is queued or running
    # overlap=False: how long the running lock lasts while the run waits (queued,
    # requeued, a retry pending) and once it has started.
    queued_ttl: float = 3600.0
    active_ttl: float = 3600.0
    # What ``job.options(...)`` set (retry, timeout, keep_result, status): carried
    # in each run's payload, as an enqueue would.
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def schedule(self) -> str:
        """The expression as shown by ``periodic list``."""
        return self.expression if self.expression is not None else f"every {self.seconds:g}s"

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "job": self.job,
            "queue": self.queue,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "every": self.seconds,
            "cron": self.expression,
            "tz": self.tz,
            "misfire": self.misfire,
            "grace": self.grace,
            "overlap": self.overlap,
            # Only when set: entries without options keep the hash they had.
            **({"options": dict(self.options)} if self.options else {}),
        }

    @property
    def digest(self) -> str:
        """12 hex characters over the whole definition (sorted keys: stable across runs)."""
        raw = orjson.dumps(self.definition(), option=orjson.OPT_SORT_KEYS)
        return hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:12]

    def payload_fields(self, slot: float) -> dict[str, Any]:
        """What a run's payload carries beside the job: its options, and SPEC §2's
        ``periodic_*`` fields."""
        fields: dict[str, Any] = {
            **self.options,
            "periodic_pjid": self.name,
            "periodic_slot": slot,
        }
        if not self.overlap:
            fields["periodic_until_executed"] = True
            fields["periodic_queued_ttl"] = self.queued_ttl
            fields["periodic_active_ttl"] = self.active_ttl
        return fields

    @property
    def period(self) -> float:
        """A bound on the gap between two slots (for the claim key's TTL)."""
        return self.seconds if self.seconds is not None else 31 * 86400.0


def _job_of(
    job: JobFunction[Any, Any] | BoundJob[Any, Any] | str,
) -> tuple[str, str | None, dict[str, Any]]:
    """The job's name, queue, and the options ``.options(...)`` set (None left out)."""
    if isinstance(job, BoundJob):
        o = job.options
        chosen = {"retry": o.retry, "timeout": o.timeout, "keep_result": o.keep_result}
        chosen["status"] = o.status
        return job.name, o.queue, {k: v for k, v in chosen.items() if v is not None}
    if isinstance(job, JobFunction):
        return job.name, job.defaults.queue, {}
    if isinstance(job, str):
        return job, None, {}
    raise TypeError(f"expected a @job function, its .options(...) or a job name, got {job!r}")


def _entry(
    job: JobFunction[Any, Any] | BoundJob[Any, Any] | str,
    *,
    name: str | None,
    queue: str | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    misfire: Misfire,
    grace: float | None,
    overlap: bool,
    queued_ttl: float,
    active_ttl: float,
    **schedule: Any,
) -> Entry:
    """What ``every`` and ``cron`` share: the checks, the job's name and queue, the Entry."""
    if misfire not in ("skip", "run_once"):
        raise ValueError(f"misfire must be 'skip' or 'run_once', got {misfire!r}")
    if grace is not None and grace < 0:
        raise ValueError(f"grace must be >= 0, got {grace!r}")
    if not (queued_ttl > 0 and active_ttl > 0):
        raise ValueError(
            f"queued_ttl and active_ttl must be > 0, got {queued_ttl!r}, {active_ttl!r}"
        )
    job_name, job_queue, options = _job_of(job)
    entry_name = name or job_name
    if not entry_name or ":" in entry_name:
        raise ValueError(f"a periodic entry needs a name without ':', got {entry_name!r}")
    return Entry(
        entry_name,
        job_name,
        queue or job_queue or "default",
        tuple(args),
        dict(kwargs or {}),
        misfire=misfire,
        grace=grace,
        overlap=overlap,
        queued_ttl=queued_ttl,
        active_ttl=active_ttl,
        options=options,
        **schedule,
    )


def every(
    seconds: float,
    job: JobFunction[Any, Any] | BoundJob[Any, Any] | str,
    *,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    name: str | None = None,
    queue: str | None = None,
    misfire: Misfire = "skip",
    grace: float | None = None,
    overlap: bool = True,
    queued_ttl: float = 3600.0,
    active_ttl: float = 3600.0,
) -> Entry:
    """Run ``job`` at every multiple of ``seconds`` since the Unix epoch (Redis's clock)."""
    if not seconds > 0:
        raise ValueError(f"every() needs seconds > 0, got {seconds!r}")
    return _entry(
        job,
        name=name,
        queue=queue,
        args=args,
        kwargs=kwargs,
        misfire=misfire,
        grace=grace,
        overlap=overlap,
        queued_ttl=queued_ttl,
        active_ttl=active_ttl,
        seconds=float(seconds),
    )


def cron(
    expression: str,
    job: JobFunction[Any, Any] | BoundJob[Any, Any] | str,
    *,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    tz: str = "UTC",
    name: str | None = None,
    queue: str | None = None,
    misfire: Misfire = "skip",
    grace: float | None = None,
    overlap: bool = True,
    queued_ttl: float = 3600.0,
    active_ttl: float = 3600.0,
) -> Entry:
    """Run ``job`` at each time the cron ``expression`` matches in zone ``tz``
    (parsed by cronsim, which follows Debian cron's DST rules)."""
    zone = ZoneInfo(tz)  # raises on an unknown zone, here rather than at the first tick
    try:
        CronSim(expression, _start(0.0, zone))
    except CronSimError as exc:
        raise ValueError(f"bad cron expression {expression!r}: {exc}") from None
    return _entry(
        job,
        name=name,
        queue=queue,
        args=args,
        kwargs=kwargs,
        misfire=misfire,
        grace=grace,
        overlap=overlap,
        queued_ttl=queued_ttl,
        active_ttl=active_ttl,
        expression=expression,
        tz=tz,
    )


def _start(now: float, zone: ZoneInfo) -> Any:
    from datetime import datetime

    return datetime.fromtimestamp(now, zone)
