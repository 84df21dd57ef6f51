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

This module is the worker's side, pure: which bucket a run falls in, and one
call's acks aggregated per (minute, name, bucket) so the script does one
``HINCRBY`` per name and bucket per minute, never one per job.
"""

from __future__ import annotations

import bisect
import sys
from array import array
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

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

# Per ack, in the call's tag string: n groups (u16, 1-based; 0 = not counted
# per name), then n buckets (u8), then n run times (µs, doubles: exact up to
# 2**53), little-endian. Read by the script only for an ack whose job was
# already gone.
TAG_BYTES = 2 + 1 + 8

# A successful run, as the processor hands it over with its ack: its name,
# and when it started and ended (epoch seconds). Aggregated per call (pack),
# so the processor pays one tuple and one clock read per job.
Run = tuple[str, float, float]


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


def pack(runs: Sequence[Run | None], prefix: str, ttl: int = MINUTE_TTL) -> tuple[bytes, bytes]:
    """One call's runs (``None``: an ack not counted per name) aggregated for the script.

    Each run counts in the minute it ended. Returns (groups, tags):
    ``groups`` a JSON object ``{"p": key prefix, "t": ttl, "g": [["<minute>",
    name, runs, run_us, bucket, count, ...], ...]}``, ``tags`` as ``TAG_BYTES``
    describes, one entry per run, in order.

    This runs once per ack on the worker's hot path: one dict lookup per run
    while the name and minute stay the same (they mostly do within a call),
    no bisect for the common run under 20 ms.
    """
    groups: list[tuple[int, str, list[Any]]] = []
    index: dict[tuple[int, str], list[Any]] = {}
    ids = array("H")
    buckets = array("B")
    times = array("d")
    add_id, add_bucket, add_time = ids.append, buckets.append, times.append
    first_bound = _BOUNDS_US[0]
    # The current group (name, minute) and what it gathered since it became
    # current, in locals: added to its totals when another group comes up.
    name_now: str | None = None
    start_now = end_now = 0.0  # the current minute's bounds (epoch s)
    group: list[Any] = [0, 0, 0, [0] * BUCKET_COUNT]
    gid = count = total = quick = 0  # quick: runs under the first bound (bucket 0)
    for run in runs:
        if run is None:
            add_id(0)
            add_bucket(0)
            add_time(0.0)
            continue
        name, started, ended = run
        if name != name_now or not start_now <= ended < end_now:
            group[1] += count
            group[2] += total
            group[3][0] += quick
            count = total = quick = 0
            minute = int(ended // 60)
            start_now, end_now, name_now = minute * 60.0, minute * 60.0 + 60.0, name
            found = index.get((minute, name))
            if found is None:
                found = index[minute, name] = [len(groups) + 1, 0, 0, [0] * BUCKET_COUNT]
                groups.append((minute, name, found))
            group = found
            gid = group[0]
        us = int((ended - started) * 1e6 + 0.5)
        count += 1
        add_id(gid)
        if us < first_bound:
            if us < 0:  # noqa: PLR1730 - hot path: a branch costs less than max()
                us = 0  # a clock that went back
            add_bucket(0)
            quick += 1
        else:
            bucket = bisect.bisect_right(_BOUNDS_US, us)
            add_bucket(bucket)
            group[3][bucket] += 1
        total += us
        add_time(us)
    group[1] += count
    group[2] += total
    group[3][0] += quick
    rows: list[list[Any]] = []
    for minute, name, (_, count, total, histogram) in groups:
        row: list[Any] = [str(minute), name, count, total]
        for bucket, n in enumerate(histogram):
            if n:
                row += (bucket, n)
        rows.append(row)
    if sys.byteorder != "little":
        for column in (ids, times):
            column.byteswap()
    tags = ids.tobytes() + buckets.tobytes() + times.tobytes()
    return orjson.dumps({"p": prefix, "t": ttl, "g": rows}), tags


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
