"""Retry backoff, idle back-off and the scaled poll interval."""

from __future__ import annotations

import random
import statistics

import pytest

from cogworker_async.timing import (
    IDLE_BACKOFF_START,
    idle_backoff,
    jittered,
    retry_backoff,
    scaled_poll_interval,
)


@pytest.mark.parametrize("count", [0, 1, 2, 5, 10, 24])
def test_retry_backoff_exact_with_seed(count: int) -> None:
    expected_rng = random.Random(1234)
    expected = [count**4 + 15 + expected_rng.randrange(10) * (count + 1) for _ in range(50)]
    rng = random.Random(1234)
    got = [retry_backoff(count, rng) for _ in range(50)]
    assert got == [float(e) for e in expected]
    assert all(isinstance(g, float) for g in got)


@pytest.mark.parametrize("count", [0, 3, 7])
def test_retry_backoff_bounds(count: int) -> None:
    rng = random.Random(7)
    low, high = count**4 + 15, count**4 + 15 + 9 * (count + 1)
    values = {retry_backoff(count, rng) for _ in range(2000)}
    assert min(values) == low
    assert max(values) == high
    # rand(10) * (count + 1): exactly ten distinct steps.
    assert len(values) == 10


def test_retry_backoff_first_values() -> None:
    class Fixed(random.Random):
        def randrange(self, *args: object, **kwargs: object) -> int:
            return 0

    assert retry_backoff(0, Fixed()) == 15.0
    assert retry_backoff(1, Fixed()) == 16.0
    assert retry_backoff(2, Fixed()) == 31.0
    assert retry_backoff(3, Fixed()) == 96.0


def test_idle_backoff_starts_at_quarter_second() -> None:
    rng = random.Random(3)
    for _ in range(1000):
        value = idle_backoff(0, 2.0, rng)
        assert 0.75 * IDLE_BACKOFF_START <= value <= IDLE_BACKOFF_START
    assert IDLE_BACKOFF_START <= 0.25


def test_idle_backoff_doubles_then_caps() -> None:
    class NoJitter(random.Random):
        def random(self) -> float:
            return 1.0

    rng = NoJitter()
    values = [idle_backoff(streak, 2.0, rng) for streak in range(8)]
    assert values == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    # A huge streak neither overflows nor exceeds the cap.
    assert idle_backoff(10_000, 2.0, rng) == 2.0
    assert idle_backoff(3, 0.3, rng) == 0.3


@pytest.mark.parametrize("streak", [0, 1, 2, 3, 50])
def test_idle_backoff_jitter_within_three_quarters_to_one(streak: int) -> None:
    maximum = 2.0
    base = min(maximum, IDLE_BACKOFF_START * 2**streak)
    rng = random.Random(streak)
    samples = [idle_backoff(streak, maximum, rng) for _ in range(2000)]
    assert all(0.75 * base <= s <= base for s in samples)
    # The jitter is real: spread over most of the quarter.
    assert max(samples) - min(samples) > 0.2 * base


def test_scaled_poll_interval_few_processes() -> None:
    # Like Sidekiq's scheduled_test.rb: 3 processes, average 5 s.
    rng = random.Random(42)
    samples = [scaled_poll_interval(5, 3, rng) for _ in range(10_000)]
    assert all(7.5 <= s <= 22.5 for s in samples)
    assert abs(statistics.fmean(samples) - 15) < 0.15
    # Uniform over the whole range, not clustered.
    assert min(samples) < 7.6
    assert max(samples) > 22.4


def test_scaled_poll_interval_many_processes() -> None:
    rng = random.Random(42)
    samples = [scaled_poll_interval(5, 20, rng) for _ in range(10_000)]
    assert all(0 <= s <= 200 for s in samples)
    assert abs(statistics.fmean(samples) - 100) < 2
    assert min(samples) < 1
    assert max(samples) > 199


def test_scaled_poll_interval_no_processes_counts_as_one() -> None:
    rng = random.Random(5)
    samples = [scaled_poll_interval(5, 0, rng) for _ in range(1000)]
    assert all(2.5 <= s <= 7.5 for s in samples)


def test_jittered_within_spread() -> None:
    rng = random.Random(9)
    samples = [jittered(10.0, rng) for _ in range(2000)]
    assert all(9.0 <= s <= 11.0 for s in samples)
    assert abs(statistics.fmean(samples) - 10.0) < 0.1
