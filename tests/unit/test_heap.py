"""worker/heap.py: the start-up heap set aside from the garbage collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from cogworker_async import Settings, Worker
from cogworker_async.worker.heap import freeze_start_up_heap


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process's heap goes back to the collector


def test_freezing_moves_the_live_heap_out_of_the_collectors_passes(unfrozen: None) -> None:
    assert gc.get_freeze_count() == 0
    freeze_start_up_heap()
    assert gc.get_freeze_count() > 0
    # The oldest generation (what a full pass walks) is left nearly empty.
    assert len(gc.get_objects(generation=2)) < gc.get_freeze_count() // 10


def test_an_embedded_worker_leaves_the_applications_heap_alone() -> None:
    # Only a process that is the worker's own (the CLI, a swarm's) freezes its heap.
    worker = Worker(Settings(redis_url="redis://127.0.0.1:1/0"), jobs=[])
    assert worker.freeze_heap is False
