"""The metrics history: per-minute and per-day counts, per job name, with a histogram.

Invariant: a job is counted in the same script call that settles it (the
ack batch in ``fetch.lua``/``ack.lua``, a failure's ``file.lua``), so an
acknowledged job is counted exactly once whatever the link does: an ack
resent after a lost reply finds its job gone and takes its own contribution
back out (``includes/history.lua``).

Layout (``<ns>:history:<epoch minute>``, a hash kept ``MINUTE_TTL``):

- ``processed``, ``failed``: every job settled that minute;
- ``<name>|r`` runs, ``<name>|f`` failures, ``<name>|us`` total run time of
  its successful runs (µs), ``<name>|h<i>`` successful runs whose run time
  fell in bucket ``i`` of ``BUCKETS_MS``.

As in Sidekiq 7, run time and histogram count successful runs only: a
failure's run time says little about the job. The per-day totals are
``<ns>:stats:processed:<day>`` and ``<ns>:stats:failed:<day>`` (kept
``DAY_TTL``).

This module is the worker's side, pure: which bucket a run falls in, and one
call's acks aggregated per (minute, name, bucket) so the script does one
``HINCRBY`` per name and bucket per minute, never one per job.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import orjson

# Upper bounds (ms, exclusive) of the duration buckets, Sidekiq 7's; the last
# bucket takes everything longer.
BUCKETS_MS: tuple[int, ...] = (
    20, 30, 45, 65, 100,
    150, 225, 335, 500, 750,
    1100, 1700, 2500, 3800, 5750,
    8500, 13000, 20000, 30000, 45000,
    65000, 100000, 150000, 225000, 335000,
)  # fmt: skip
BUCKET_COUNT = len(BUCKETS_MS) + 1
_BOUNDS_US = tuple(ms * 1000 for ms in BUCKETS_MS)

MINUTE_TTL = 4 * 3600  # s a per-minute hash is kept
DAY_TTL = 180 * 24 * 3600  # s a per-day counter is kept

# Per ack, in the call's tag string: its group (u16), its bucket (u8) and its
# run time (µs, a double: exact up to 2**53). Read by the script only for an
# ack whose job was already gone.
TAG = struct.Struct(">HBd")


def bucket_of(run_us: int) -> int:
    """The histogram bucket of a run of ``run_us`` microseconds (0 .. BUCKET_COUNT - 1)."""
    return bisect.bisect_right(_BOUNDS_US, run_us)


def bucket_label(index: int) -> str:
    """What a bucket holds, for people: "<20ms", "20-30ms", ..., ">=335000ms"."""
    if index == 0:
        return f"<{BUCKETS_MS[0]}ms"
    if index >= len(BUCKETS_MS):
        return f">={BUCKETS_MS[-1]}ms"
    return f"{BUCKETS_MS[index - 1]}-{BUCKETS_MS[index]}ms"


def minute_of(epoch: float) -> int:
    return int(epoch // 60)


class Run(NamedTuple):
    """A successful run, as the history needs it: its name, minute and run time (µs)."""

    name: str
    minute: int
    run_us: int


def pack(runs: Sequence[Run | None], prefix: str, ttl: int = MINUTE_TTL) -> tuple[bytes, bytes]:
    """One call's runs (``None``: an ack not counted per name) aggregated for the script.

    Returns (groups, tags): ``groups`` a JSON object ``{"p": key prefix,
    "t": ttl, "g": [["<minute>", name, runs, run_us, bucket, count, ...], ...]}``,
    ``tags`` one ``TAG`` per run, in order (an untracked ack's group is 0).
    """
    index: dict[tuple[int, str], int] = {}
    groups: list[list[object]] = []
    buckets: list[dict[int, int]] = []
    tags = bytearray()
    for run in runs:
        if run is None:
            tags += TAG.pack(0, 0, 0.0)
            continue
        key = (run.minute, run.name)
        at = index.get(key)
        if at is None:
            at = index[key] = len(groups)
            groups.append([str(run.minute), run.name, 0, 0])
            buckets.append({})
        group = groups[at]
        group[2] += 1  # type: ignore[operator]
        group[3] += run.run_us  # type: ignore[operator]
        bucket = bisect.bisect_right(_BOUNDS_US, run.run_us)
        counts = buckets[at]
        counts[bucket] = counts.get(bucket, 0) + 1
        tags += TAG.pack(at + 1, bucket, float(run.run_us))
    for group, counts in zip(groups, buckets, strict=True):
        for bucket, count in counts.items():
            group.extend((bucket, count))
    return orjson.dumps({"p": prefix, "t": ttl, "g": groups}), bytes(tags)


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
    processed = failed = 0
    per_name: dict[str, list[int]] = {}
    for raw_field, raw_value in fields.items():
        field = raw_field.decode("utf-8", "replace") if isinstance(raw_field, bytes) else raw_field
        value = _int(raw_value)
        if field == "processed":
            processed = value
            continue
        if field == "failed":
            failed = value
            continue
        name, sep, metric = field.rpartition("|")
        if not sep:
            continue
        counts = per_name.get(name)
        if counts is None:
            counts = per_name[name] = [0] * (3 + BUCKET_COUNT)
        if metric == "r":
            counts[0] = value
        elif metric == "f":
            counts[1] = value
        elif metric == "us":
            counts[2] = value
        elif metric.startswith("h") and metric[1:].isdigit() and int(metric[1:]) < BUCKET_COUNT:
            counts[3 + int(metric[1:])] = value
    jobs = {name: JobCounts(c[0], c[1], c[2], tuple(c[3:])) for name, c in sorted(per_name.items())}
    return MinuteCounts(processed, failed, jobs)
