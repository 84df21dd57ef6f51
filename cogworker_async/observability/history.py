"""The metrics history: per-minute and per-day counts, per job name, with a histogram.

Invariant: a job is counted in the same script call that settles it (the
ack batch in ``fetch.lua``/``ack.lua``, a failure's ``file.lua``), so an
acknowledged job is counted exactly once whatever the link does: an ack
resent after a lost reply finds its job gone and takes its own contribution
back out (``includes/history.lua``).

Layout (``<ns>:history:<epoch minute>``, a hash kept ``MINUTE_TTL``):
``<name>|f`` failures, ``<name>|us`` total run time of its successful runs
(µs), ``<name>|h<i>`` successful runs whose run time fell in bucket ``i`` of
``BUCKETS_MS`` (a job without a name, unparseable, is ``|f``). Everything
else is a sum read back: a name's runs are its histogram plus its failures,
the minute's processed and failed the sums over every name. So a call writes
one ``HINCRBY`` per name and bucket met, one for the run time, and an
``EXPIRE`` only when it created a field.

As in Sidekiq 7, run time and histogram count successful runs only: a
failure's run time says little about the job. The per-day totals are
``<ns>:stats:processed:<day>`` and ``<ns>:stats:failed:<day>`` (kept
``DAY_TTL``).

This module's writing side (buckets, ``pack``) lives in ``store/run_history.py``,
where the ack's call packs it; it is re-exported here with the reading side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from cogworker_async.store.run_history import (
    BUCKET_COUNT,
    BUCKETS_MS,
    DAY_TTL,
    MINUTE_TTL,
    TAG_BYTES,
    Run,
    bucket_of,
    minute_of,
    pack,
)

__all__ = [
    "BUCKETS_MS",
    "BUCKET_COUNT",
    "DAY_TTL",
    "MINUTE_TTL",
    "TAG_BYTES",
    "JobCounts",
    "MinuteCounts",
    "Run",
    "bucket_label",
    "bucket_of",
    "minute_of",
    "pack",
    "parse_minute",
]


def bucket_label(index: int) -> str:
    """What a bucket holds, for people: "<20ms", "20-30ms", ..., ">=335000ms"."""
    if index == 0:
        return f"<{BUCKETS_MS[0]}ms"
    if index >= len(BUCKETS_MS):
        return f">={BUCKETS_MS[-1]}ms"
    return f"{BUCKETS_MS[index - 1]}-{BUCKETS_MS[index]}ms"


class JobCounts(NamedTuple):
    """One job name's counts in one minute (run time and histogram: successes only)."""

    runs: int
    failures: int
    run_us: int
    histogram: tuple[int, ...]  # BUCKET_COUNT counts, bucket i per BUCKETS_MS


class MinuteCounts(NamedTuple):
    processed: int
    failed: int
    jobs: dict[str, JobCounts]


def _int(value: bytes | str) -> int:
    try:
        return int(value)
    except ValueError:
        return 0  # a corrupt field reads as 0, never a failed read


def parse_minute(fields: Mapping[bytes | str, bytes | str]) -> MinuteCounts:
    """A minute's hash as read (HGETALL) → its counts; unknown or corrupt fields are skipped."""
    per_name: dict[str, list[int]] = {}
    for raw_field, raw_value in fields.items():
        field = raw_field.decode("utf-8", "replace") if isinstance(raw_field, bytes) else raw_field
        name, sep, metric = field.rpartition("|")
        if not sep:
            continue
        if metric == "f":
            at = 0
        elif metric == "us":
            at = 1
        elif metric.startswith("h") and metric[1:].isdigit() and int(metric[1:]) < BUCKET_COUNT:
            at = 2 + int(metric[1:])
        else:
            continue
        counts = per_name.get(name)
        if counts is None:
            counts = per_name[name] = [0] * (2 + BUCKET_COUNT)
        counts[at] = _int(raw_value)
    processed = failed = 0
    jobs: dict[str, JobCounts] = {}
    for name, c in sorted(per_name.items()):
        runs = c[0] + sum(c[2:])
        processed += runs
        failed += c[0]
        if name:
            jobs[name] = JobCounts(runs, c[0], c[1], tuple(c[2:]))
    return MinuteCounts(processed, failed, jobs)
