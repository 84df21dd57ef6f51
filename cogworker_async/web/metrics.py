"""The Metrics page's arithmetic, pure: percentiles from the history's duration
buckets and one table row per job name.

A histogram only knows how many runs fell in each bucket, so a percentile is an
estimate: linear within the bucket it falls in (as Prometheus'
``histogram_quantile`` does), the first bucket starting at 0 ms. The last
bucket is open (longer than ``BUCKETS_MS[-1]``): a percentile that falls there
reads as that bound, and ``open_ended`` says it is only a lower bound. Counts
read from Redis may be garbage (a negative count): it is taken as 0, never a
crash or a value outside the buckets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cogworker_async.api.history import History
from cogworker_async.observability.history import BUCKETS_MS, bucket_label


def percentile_ms(
    histogram: Sequence[int], q: float, bounds: Sequence[int] = BUCKETS_MS
) -> float | None:
    """The ``q`` quantile (0..1) in ms estimated from ``histogram`` over ``bounds``.

    ``histogram[i]`` counts runs under ``bounds[i]`` ms (and at least the bound
    before); ``histogram[len(bounds)]`` the rest. None when nothing was counted.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be within 0..1, not {q}")
    counts = [max(0, c) for c in histogram[: len(bounds) + 1]]
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    below = 0
    for i, count in enumerate(counts):
        if count and below + count >= rank:
            if i >= len(bounds):
                return float(bounds[-1])  # the open bucket: a lower bound
            lower = bounds[i - 1] if i else 0
            return lower + (bounds[i] - lower) * max(0.0, rank - below) / count
        below += count
    return float(bounds[-1])  # not reached: rank <= total


def open_ended(value_ms: float | None, bounds: Sequence[int] = BUCKETS_MS) -> bool:
    """Whether a ``percentile_ms`` value is the open last bucket's lower bound."""
    return value_ms is not None and value_ms >= bounds[-1]


@dataclass(frozen=True, slots=True)
class JobRow:
    name: str
    runs: int
    failures: int
    failure_pct: float | None
    """None without runs (or with garbage counts that make runs 0)."""
    run_time: float
    """Total run time (s) of the successful runs."""
    mean_ms: float | None
    p50_ms: float | None
    p95_ms: float | None


def job_rows(history: History) -> list[JobRow]:
    """One row per job name over the minutes read, most total run time first (as Sidekiq)."""
    rows = []
    for name, s in history.jobs().items():
        mean = s.mean_run_time
        rows.append(
            JobRow(
                name=name,
                runs=s.runs,
                failures=s.failures,
                failure_pct=100.0 * s.failures / s.runs if s.runs > 0 else None,
                run_time=s.run_time,
                mean_ms=None if mean is None else mean * 1000.0,
                p50_ms=percentile_ms(s.histogram, 0.50, history.buckets_ms),
                p95_ms=percentile_ms(s.histogram, 0.95, history.buckets_ms),
            )
        )
    rows.sort(key=lambda r: (-r.run_time, -r.runs, r.name))
    return rows


def has_data(history: History) -> bool:
    """Whether anything was counted in the minutes read (history on and busy)."""
    return any(m.processed or m.failed or m.jobs for m in history.minutes)


def bucket_rows(histogram: Sequence[int]) -> list[tuple[str, int]]:
    """(label, runs) for each duration bucket that counted a run, fastest first."""
    return [(bucket_label(i), count) for i, count in enumerate(histogram) if count > 0]
