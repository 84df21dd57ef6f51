"""One periodic entry, as data: what it enqueues, when, where, and what a missed or
overlapping slot does. ``periodic.every`` and ``periodic.cron`` build it.

Beside ``periodic/`` rather than in it: a ``@job`` carries the entries declared
on it (``JobFunction.schedules``) and ``periodic/`` builds jobs (``@periodic``),
so the type sits below both. ``cogworker_async.periodic.Entry`` (and
``periodic.entries.Entry``) is this class.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

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
        """12 hex characters over the whole definition (sorted keys: stable across runs);
        shown by ``periodic list``, not part of a slot's claim."""
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
