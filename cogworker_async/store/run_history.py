"""The history of runs as the ack's step writes it: which bucket a run falls in,
and one call's acks aggregated per (minute, name, bucket) so the script does
one ``HINCRBY`` per name and bucket per minute, never one per job.

The layout, and the reading side, are ``observability/history.py``'s (which
re-exports these names): they live here, below it, because the store's
commands pack the history into the ack's own call.
"""

from __future__ import annotations

import bisect
import sys
from array import array
from collections.abc import Sequence
from typing import Any

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
