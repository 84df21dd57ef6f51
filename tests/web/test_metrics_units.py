"""The Metrics page's pure parts: percentiles from duration buckets, the per-job table."""

from __future__ import annotations

import pytest

from cogworker_async.api.history import History, JobMinute, MinutePoint
from cogworker_async.observability.history import BUCKET_COUNT, BUCKETS_MS, bucket_of
from cogworker_async.web.metrics import has_data, job_rows, open_ended, percentile_ms


def hist(**at: int) -> tuple[int, ...]:
    """A histogram with ``b<i>=count`` set, the rest 0."""
    counts = [0] * BUCKET_COUNT
    for name, n in at.items():
        counts[int(name[1:])] = n
    return tuple(counts)


def test_nothing_counted_has_no_percentile() -> None:
    assert percentile_ms([0] * BUCKET_COUNT, 0.5) is None
    assert percentile_ms([], 0.5) is None


def test_percentile_interpolates_within_its_bucket() -> None:
    # 10 runs in bucket 0 (0-20 ms): the median is half way, p95 near the top.
    assert percentile_ms(hist(b0=10), 0.5) == pytest.approx(10.0)
    assert percentile_ms(hist(b0=10), 0.95) == pytest.approx(19.0)
    # 50 in 0-20 ms, 50 in 100-150 ms (bucket 5): p50 is 20, p95 at 90% into 100-150.
    split = hist(b0=50, b5=50)
    assert percentile_ms(split, 0.5) == pytest.approx(20.0)
    assert percentile_ms(split, 0.95) == pytest.approx(145.0)
    assert percentile_ms(split, 0.0) == pytest.approx(0.0)
    assert percentile_ms(split, 1.0) == pytest.approx(150.0)


def test_percentile_stays_in_the_bucket_of_the_runs_it_counts() -> None:
    for run_ms in (1, 25, 70, 999, 4000, 200_000):
        counts = [0] * BUCKET_COUNT
        counts[bucket_of(run_ms * 1000)] = 3
        value = percentile_ms(counts, 0.95)
        assert value is not None
        i = bucket_of(run_ms * 1000)
        assert (BUCKETS_MS[i - 1] if i else 0) <= value <= BUCKETS_MS[i]


def test_the_open_last_bucket_reads_as_its_lower_bound() -> None:
    value = percentile_ms(hist(b0=1, **{f"b{BUCKET_COUNT - 1}": 99}), 0.95)
    assert value == float(BUCKETS_MS[-1])
    assert open_ended(value)
    assert not open_ended(percentile_ms(hist(b0=1), 0.5))
    assert not open_ended(None)


def test_garbage_counts_never_break_a_percentile() -> None:
    assert percentile_ms(hist(b0=-5, b3=4), 0.5) == pytest.approx(55.0)  # -5 taken as 0
    assert percentile_ms(hist(b0=-5), 0.5) is None
    assert percentile_ms([1] * (BUCKET_COUNT + 5), 0.5) is not None  # extra counts ignored
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        percentile_ms(hist(b0=1), 1.5)


def test_job_rows_sum_the_minutes_and_sort_by_run_time() -> None:
    minutes = [
        MinutePoint(
            1,
            12,
            2,
            {"a": JobMinute(10, 2, 0.8, hist(b1=8)), "b": JobMinute(2, 0, 4.0, hist(b9=2))},
        ),
        MinutePoint(2, 0, 0, {}),
        MinutePoint(3, 5, 0, {"a": JobMinute(5, 0, 0.5, hist(b1=5))}),
    ]
    history = History(minutes, [])
    assert has_data(history)
    b, a = job_rows(history)
    assert (a.name, a.runs, a.failures) == ("a", 15, 2)
    assert a.failure_pct == pytest.approx(100 * 2 / 15)
    assert a.mean_ms == pytest.approx(1300 / 13)
    assert a.p50_ms is not None
    assert 20 <= a.p50_ms <= 30
    assert (b.name, b.runs, b.failures, b.failure_pct) == ("b", 2, 0, 0.0)
    assert b.mean_ms == pytest.approx(2000.0)


def test_job_rows_with_garbage_counts() -> None:
    # A minute whose histogram fields went negative: runs 0 with failures, no division by 0.
    odd = MinutePoint(1, 0, 3, {"odd": JobMinute(0, 3, -1.0, hist(b0=-3))})
    (row,) = job_rows(History([odd], []))
    assert row.failure_pct is None
    assert row.mean_ms is None
    assert row.p50_ms is None
    assert not has_data(History([MinutePoint(1, 0, 0, {})], []))
