"""The fetcher's memory of where fetched jobs came from (the shutdown requeue's targets)."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest

from cogworker_async.keys import Keys
from cogworker_async.settings import QueueSpec
from cogworker_async.worker.fetcher import SOURCES_PRUNE_AT, Fetcher


def fetcher(*queues: str) -> Fetcher:
    none: Any = None  # no call reaches Redis here
    return Fetcher(
        none,
        none,
        Keys("t"),
        identity="me",
        queues=[QueueSpec(q) for q in queues],
        strict_order=False,
        reliable=True,
        idle_max=1.0,
        logger=logging.getLogger("test"),
        rng=random.Random(1),
        on_missing_ack=lambda ack: None,
    )


def test_one_queue_needs_no_memory() -> None:
    f = fetcher("only")
    f._remember([b"j1"], [("only", 1)])
    assert f.sole_queue == "only"
    assert f.sources_of([b"j1", b"never-seen"]) == {b"j1": "only", b"never-seen": "only"}


def test_runs_map_each_job_to_its_queue() -> None:
    f = fetcher("a", "b")
    f._remember([b"1", b"2", b"3"], [("b", 2), ("a", 1)])
    assert f.sole_queue is None
    assert f.sources_of([b"1", b"2", b"3", b"4"]) == {b"1": "b", b"2": "b", b"3": "a"}


@pytest.mark.parametrize("batches", [SOURCES_PRUNE_AT * 3 + 7])
def test_batches_with_nothing_of_ours_are_forgotten(batches: int) -> None:
    f = fetcher("a", "b")
    ours = {b"0-0", b"5-1"}
    f.ours = lambda: ours
    for n in range(batches):
        f._remember([f"{n}-0".encode(), f"{n}-1".encode()], [("a", 1), ("b", 1)])
    # Long-running jobs of old batches are still known; the rest is gone.
    assert f.sources_of(ours) == {b"0-0": "a", b"5-1": "b"}
    assert len(f._batches) < SOURCES_PRUNE_AT
    last = f"{batches - 1}-1".encode()
    assert f.sources_of([last]) == {last: "b"}  # not yet looked at: kept
