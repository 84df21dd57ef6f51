"""The order in which several queues are tried."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from cogworker_async.settings import QueueSpec
from cogworker_async.worker.fetcher import weighted_order

SPECS = [QueueSpec("a", 3), QueueSpec("b", 1)]


def test_strict_order_preserved() -> None:
    specs = [QueueSpec("c", 1), QueueSpec("a", 9), QueueSpec("b", 2)]
    rng = random.Random(1)
    for _ in range(100):
        assert weighted_order(specs, True, rng) == ["c", "a", "b"]


def test_single_queue() -> None:
    assert weighted_order([QueueSpec("only", 5)], False, random.Random(1)) == ["only"]
    # Every queue paused: nothing to try (it raised IndexError, and the fetch lane looped on it).
    assert weighted_order([], False, random.Random(1)) == []


def test_weighted_share_of_first() -> None:
    rng = random.Random(2024)
    draws = 20_000
    firsts = Counter(weighted_order(SPECS, False, rng)[0] for _ in range(draws))
    assert abs(firsts["a"] / draws - 0.75) <= 0.02
    assert firsts["a"] + firsts["b"] == draws


def test_equal_weights_are_fair() -> None:
    specs = [QueueSpec("x", 1), QueueSpec("y", 1), QueueSpec("z", 1)]
    rng = random.Random(11)
    draws = 15_000
    firsts = Counter(weighted_order(specs, False, rng)[0] for _ in range(draws))
    for name in "xyz":
        assert abs(firsts[name] / draws - 1 / 3) <= 0.02


@pytest.mark.parametrize("strict", [True, False])
def test_every_queue_once_per_order(strict: bool) -> None:
    specs = [QueueSpec("a", 3), QueueSpec("b", 1), QueueSpec("c", 5), QueueSpec("d", 2)]
    rng = random.Random(5)
    for _ in range(2000):
        order = weighted_order(specs, strict, rng)
        assert sorted(order) == ["a", "b", "c", "d"]
        assert len(order) == len(set(order))


class NoShuffle(random.Random):
    """A generator whose shuffle is refused: the order is drawn, never a list shuffled."""

    def shuffle(self, x: Any) -> None:
        raise AssertionError("weighted_order shuffled a list (one entry per unit of weight?)")


def test_large_weights_cost_one_draw_per_queue() -> None:
    specs = [QueueSpec("a", 1000), QueueSpec("b", 1), QueueSpec("c", 999)]
    rng = NoShuffle(3)
    draws = 20_000
    firsts = Counter(weighted_order(specs, False, rng)[0] for _ in range(draws))
    for spec in specs:
        assert abs(firsts[spec.name] / draws - spec.weight / 2000) <= 0.015


def _spec_reference(specs: list[QueueSpec], rng: random.Random) -> list[str]:
    """The SPEC's words: each queue repeated by its weight, shuffled, de-duplicated."""
    pool = [s.name for s in specs for _ in range(s.weight)]
    rng.shuffle(pool)
    return list(dict.fromkeys(pool))


def test_whole_order_distributed_as_the_spec_says() -> None:
    specs = [QueueSpec("a", 3), QueueSpec("b", 2), QueueSpec("c", 1)]
    draws = 30_000
    ours = Counter(tuple(weighted_order(specs, False, random.Random(i))) for i in range(draws))
    spec = Counter(tuple(_spec_reference(specs, random.Random(-i - 1))) for i in range(draws))
    assert set(ours) == set(spec)
    for order in spec:
        assert abs(ours[order] - spec[order]) / draws <= 0.015, order
