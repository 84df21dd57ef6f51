"""The metrics history's pure parts: buckets, one call's aggregation, reading a minute."""

from __future__ import annotations

import struct

import orjson
import pytest

from cogworker_async.api.history import History, JobMinute, MinutePoint
from cogworker_async.observability.history import (
    BUCKET_COUNT,
    BUCKETS_MS,
    TAG_BYTES,
    Run,
    bucket_label,
    bucket_of,
    minute_of,
    pack,
    parse_minute,
)


def run(name: str, minute: int, us: int) -> Run:
    """A run of ``us`` µs that ended a second into ``minute``."""
    end = minute * 60 + 1.0
    return (name, end - us / 1e6, end)


def tag(tags: bytes, count: int, i: int) -> tuple[int, int, float]:
    """The i-th ack's (group, bucket, run time) in a call's tags of ``count`` acks."""
    group = int.from_bytes(tags[2 * i : 2 * i + 2], "little")
    at = 3 * count + 8 * i
    return group, tags[2 * count + i], struct.unpack("<d", tags[at : at + 8])[0]


def test_buckets_are_sidekiqs_and_increasing() -> None:
    assert BUCKETS_MS[:5] == (20, 30, 45, 65, 100)
    assert BUCKETS_MS[-1] == 335000
    assert list(BUCKETS_MS) == sorted(set(BUCKETS_MS))
    assert BUCKET_COUNT == len(BUCKETS_MS) + 1 == 26


@pytest.mark.parametrize(
    ("run_us", "bucket"),
    [
        (0, 0),
        (19_999, 0),
        (20_000, 1),  # a bound belongs to the bucket above it
        (29_999, 1),
        (30_000, 2),
        (64_999, 3),
        (65_000, 4),
        (334_999_999, 24),
        (335_000_000, 25),
        (10**12, 25),
    ],
)
def test_bucket_of(run_us: int, bucket: int) -> None:
    assert bucket_of(run_us) == bucket


def test_bucket_labels() -> None:
    assert bucket_label(0) == "<20ms"
    assert bucket_label(1) == "20-30ms"
    assert bucket_label(BUCKET_COUNT - 1) == ">=335000ms"


def test_minute_of() -> None:
    assert minute_of(0) == 0
    assert minute_of(59.999) == 0
    assert minute_of(60) == 1
    assert minute_of(1_700_000_000.5) == 28_333_333


def test_pack_aggregates_per_minute_and_name_with_bucket_counts() -> None:
    runs = [
        run("a", 10, 1_000),
        run("b", 10, 25_000),
        None,  # an ack not counted per name
        run("a", 10, 21_000),
        run("a", 11, 5),
        run("a", 10, 2_000),
    ]
    groups, tags = pack(runs, "ns:history:", ttl=99)
    decoded = orjson.loads(groups)
    assert decoded["p"] == "ns:history:"
    assert decoded["t"] == 99
    by_key = {(g[0], g[1]): g[2:] for g in decoded["g"]}
    assert by_key == {
        ("10", "a"): [3, 24_000, 0, 2, 1, 1],
        ("10", "b"): [1, 25_000, 1, 1],
        ("11", "a"): [1, 5, 0, 1],
    }
    # One tag per ack, in order: 1-based group, bucket, run time.
    assert len(tags) == TAG_BYTES * len(runs)
    unpacked = [tag(tags, len(runs), i) for i in range(len(runs))]
    assert unpacked == [
        (1, 0, 1000.0),
        (2, 1, 25000.0),
        (0, 0, 0.0),
        (1, 1, 21000.0),
        (3, 0, 5.0),
        (1, 0, 2000.0),
    ]


def test_pack_clamps_a_clock_that_went_back() -> None:
    groups, _ = pack([("a", 100.0, 99.0)], "p:")
    assert orjson.loads(groups)["g"] == [["1", "a", 1, 0, 0, 1]]


def test_pack_of_nothing_counted() -> None:
    groups, tags = pack([None, None], "p:")
    assert orjson.loads(groups)["g"] == []
    assert tags == bytes(TAG_BYTES * 2)


def test_parse_minute_reads_fields_and_skips_junk() -> None:
    counts = parse_minute(
        {
            b"mail|send|f": b"1",  # a name may hold the separator: the last one splits
            b"mail|send|us": b"123",
            b"mail|send|h0": b"3",
            b"mail|send|h25": b"1",
            b"x|f": b"1",
            b"x|h99": b"4",  # no such bucket
            b"x|zz": b"4",  # no such metric
            b"|f": b"2",  # no name (unparseable): in the totals only
            b"nosep": b"4",
            b"processed": b"100",  # not a field of ours
            b"y|h1": b"corrupt",
        }
    )
    send = counts.jobs["mail|send"]
    assert (send.runs, send.failures, send.run_us) == (5, 1, 123)
    assert send.histogram[0] == 3
    assert send.histogram[25] == 1
    assert sum(send.histogram) == 4
    assert counts.jobs["x"] == (1, 1, 0, (0,) * BUCKET_COUNT)
    assert counts.jobs["y"].runs == 0
    assert list(counts.jobs) == ["mail|send", "x", "y"]
    # Runs are the histogram plus the failures; the totals, sums over every name.
    assert counts.processed == 5 + 1 + 2
    assert counts.failed == 1 + 1 + 2


def test_parse_minute_of_nothing() -> None:
    assert parse_minute({}) == (0, 0, {})


def test_history_sums_jobs_over_minutes() -> None:
    h = (1, 0) + (0,) * 24
    history = History(
        minutes=[
            MinutePoint(1, 3, 1, {"a": JobMinute(3, 1, 0.5, (2,) + (0,) * 25)}),
            MinutePoint(2, 2, 0, {"a": JobMinute(1, 0, 0.25, h), "b": JobMinute(1, 0, 1.0, h)}),
            MinutePoint(3, 0, 0),
        ],
        days=[],
    )
    jobs = history.jobs()
    assert jobs["a"].runs == 4
    assert jobs["a"].failures == 1
    assert jobs["a"].run_time == 0.75
    assert jobs["a"].histogram[0] == 3
    assert jobs["a"].mean_run_time == 0.25
    assert jobs["b"].mean_run_time == 1.0
    data = history.as_dict()
    assert data["jobs"]["a"]["runs"] == 4
    assert data["minutes"][0]["jobs"]["a"]["runs"] == 3
    assert len(data["buckets_ms"]) == 25
