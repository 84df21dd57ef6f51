"""The metrics history as typed series, oldest first (for ``stats --history``, the
web UI's charts and anyone else).

Per minute (kept ``MINUTE_TTL``, a few hours): processed, failed, and per job
name its runs, failures, run time and duration histogram. Per day (kept
``DAY_TTL``): processed and failed. A minute or day with nothing counted, or
with history off, reads as zeros: a series always has one point per minute or
day asked for. Read in one pipelined round trip; a key of the wrong type reads
as empty.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.observability.history import (
    BUCKETS_MS,
    DAY_TTL,
    MINUTE_TTL,
    JobCounts,
    minute_of,
    parse_minute,
)
from cogworker_async.store.commands import today
from cogworker_async.store.faults import is_outage
from cogworker_async.store.replies import count as _count

MAX_MINUTES = MINUTE_TTL // 60
MAX_DAYS = DAY_TTL // 86_400


@dataclass(frozen=True, slots=True)
class JobMinute:
    """One job name in one minute. ``run_time`` (s) and ``histogram`` count its
    successful runs only; ``histogram[i]`` is the runs that took less than
    ``BUCKETS_MS[i]`` ms (and at least the bound before), the last one the rest."""

    runs: int
    failures: int
    run_time: float
    histogram: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MinutePoint:
    minute: int  # epoch minute: it starts at minute * 60
    processed: int
    failed: int
    jobs: dict[str, JobMinute] = field(default_factory=dict)

    @property
    def at(self) -> float:
        return self.minute * 60.0


@dataclass(frozen=True, slots=True)
class DayPoint:
    day: str  # UTC, YYYY-MM-DD
    processed: int
    failed: int


@dataclass(frozen=True, slots=True)
class JobSummary:
    """One job name over the minutes read."""

    runs: int
    failures: int
    run_time: float
    histogram: tuple[int, ...]

    @property
    def mean_run_time(self) -> float | None:
        """Mean run time (s) of the successful runs; None without any."""
        ok = self.runs - self.failures
        return self.run_time / ok if ok > 0 else None


@dataclass(frozen=True, slots=True)
class History:
    minutes: list[MinutePoint]
    days: list[DayPoint]
    buckets_ms: tuple[int, ...] = BUCKETS_MS

    def jobs(self) -> dict[str, JobSummary]:
        """Each job name's counts summed over ``minutes``, by name."""
        sums: dict[str, list[Any]] = {}
        for point in self.minutes:
            for name, job in point.jobs.items():
                total = sums.setdefault(name, [0, 0, 0.0, [0] * len(job.histogram)])
                total[0] += job.runs
                total[1] += job.failures
                total[2] += job.run_time
                total[3] = [a + b for a, b in zip(total[3], job.histogram, strict=True)]
        return {name: JobSummary(t[0], t[1], t[2], tuple(t[3])) for name, t in sorted(sums.items())}

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["jobs"] = {name: asdict(s) for name, s in self.jobs().items()}
        return data


def _job(counts: JobCounts) -> JobMinute:
    return JobMinute(counts.runs, counts.failures, counts.run_us / 1e6, counts.histogram)


async def history(
    redis: Redis, keys: Keys, *, minutes: int = 60, days: int = 30, now: float | None = None
) -> History:
    """The last ``minutes`` minutes and ``days`` days (the current ones included, so far).

    ``minutes`` is capped at what is kept (``MAX_MINUTES``), ``days`` at ``MAX_DAYS``.
    """
    if minutes < 0 or days < 0:
        raise ValueError("minutes and days must be >= 0")
    now = time.time() if now is None else now
    last = minute_of(now)
    minute_ids = list(range(last - min(minutes, MAX_MINUTES) + 1, last + 1))
    day_names = [today(now - 86_400 * back) for back in range(min(days, MAX_DAYS) - 1, -1, -1)]
    async with redis.pipeline(transaction=False) as pipe:
        for minute in minute_ids:
            pipe.hgetall(keys.history(minute))
        for day in day_names:
            pipe.get(keys.stats_processed_on(day))
            pipe.get(keys.stats_failed_on(day))
        replies = await pipe.execute(raise_on_error=False)
    for reply in replies:
        if isinstance(reply, Exception) and is_outage(reply):
            raise reply
    points = []
    for minute, reply in zip(minute_ids, replies, strict=False):
        counts = parse_minute(reply if isinstance(reply, dict) else {})
        jobs = {name: _job(c) for name, c in counts.jobs.items()}
        points.append(MinutePoint(minute, counts.processed, counts.failed, jobs))
    day_replies = replies[len(minute_ids) :]
    day_points = [
        DayPoint(day, _count(day_replies[2 * i]), _count(day_replies[2 * i + 1]))
        for i, day in enumerate(day_names)
    ]
    return History(points, day_points)
