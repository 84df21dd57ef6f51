"""The shedder's rules (worker/shedding.py): which held jobs go back, and when.

A real Handout and event loop timers; the give back is a stand-in that records
what it was given (the fetcher's integration and chaos tests send it to Redis).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import anyio
import pytest

from cogworker_async.worker.handout import Handout
from cogworker_async.worker.shedding import SHED_AFTER, Shedder

pytestmark = pytest.mark.anyio


class _GiveBack:
    def __init__(self) -> None:
        self.given: list[list[bytes]] = []

    def later(self, newest_first: Sequence[bytes], keep: Callable[[list[bytes]], None]) -> None:
        self.given.append(list(newest_first))


def _shedder(prefetch: int, after: float) -> tuple[Shedder, Handout, _GiveBack]:
    handout, back = Handout(on_wait=lambda: None), _GiveBack()
    shedder = Shedder(
        handout,
        cast(Any, back),
        prefetch=prefetch,
        after=after,
        fetch_out=lambda: False,
        keep=handout.deliver,
    )
    return shedder, handout, back


async def _rounds(back: _GiveBack, count: int = 1) -> None:
    """Wait until ``count`` give backs were made (bounded)."""
    with anyio.fail_after(5):
        while len(back.given) < count:
            await anyio.sleep(SHED_AFTER / 5)


async def test_by_default_every_held_job_goes_back_prefetch_included(anyio_backend: str) -> None:
    """Issue 26 §2: the job held as prefetch waited a whole job's length."""
    shedder, handout, back = _shedder(prefetch=1, after=SHED_AFTER)
    jobs = [b"a", b"b", b"c"]
    handout.deliver(jobs)
    shedder.watch()
    started = time.monotonic()
    await _rounds(back)
    assert time.monotonic() - started < 2 * SHED_AFTER + 0.5  # ~one round on an idle machine
    assert back.given == [[b"c", b"b", b"a"]]  # newest first: their order kept at the front
    assert not handout.ready
    assert shedder.slow
    assert shedder.hold_none
    shedder.drained()  # a processor found nothing ready: hold ahead again
    assert not shedder.slow
    assert not shedder.hold_none


async def test_quick_jobs_are_left_alone(anyio_backend: str) -> None:
    shedder, handout, back = _shedder(prefetch=1, after=SHED_AFTER)
    handout.deliver([b"a", b"b"])
    shedder.watch()
    assert await handout.get() == b"a"  # taken within the round
    assert await handout.get() == b"b"
    await anyio.sleep(SHED_AFTER * 3)
    assert back.given == []
    assert not shedder.slow
    assert not shedder.hold_none


async def test_a_long_give_back_held_after_keeps_prefetch_sends_back_the_excess(
    anyio_backend: str,
) -> None:
    shedder, handout, back = _shedder(prefetch=2, after=60.0)
    handout.deliver([b"a", b"b", b"c", b"d"])
    shedder.watch()
    await _rounds(back)
    await anyio.sleep(SHED_AFTER * 3)  # more rounds: prefetch's jobs stay
    assert back.given == [[b"d", b"c"]]
    assert list(handout.ready) == [b"a", b"b"]
    assert shedder.slow
    assert not shedder.hold_none
