"""Handout: every job delivered reaches a waiting processor, however the deliveries fall.

Pure asyncio, no Redis. The chaos test that found the stall
(``tests/chaos/test_fair_dispatch.py``, the freeze test) needed two workers
and luck; these pin the rule itself.
"""

from __future__ import annotations

import asyncio

import pytest

from cogworker_async.worker.handout import Handout

pytestmark = pytest.mark.anyio


async def _settle(turns: int = 10) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_a_second_delivery_in_the_turn_of_a_hand_out_still_reaches_the_waiting() -> None:
    """A hand-out that emptied ``ready`` schedules its look for the next turn; a
    delivery before that look (two fetch replies landing in one turn) must be
    handed out by it. It was not: the look saw nothing left from the first
    hand-out and returned, and the processors waited beside jobs held ready,
    while the fetcher, counting those jobs, asked for none: the worker stalled
    for good."""
    handout = Handout(on_wait=lambda: None)
    processors = [asyncio.create_task(handout.get()) for _ in range(4)]
    await _settle()
    assert handout.waiting() == 4
    handout.deliver([b"job-1"])  # one waiter woken, nothing left: its look is due
    handout.deliver([b"job-2", b"job-3", b"job-4"])  # same turn, before the look
    await _settle()
    assert not handout.ready
    assert sorted([await p for p in processors]) == [b"job-1", b"job-2", b"job-3", b"job-4"]


async def test_jobs_left_over_while_processors_wait_are_handed_out_by_the_look() -> None:
    handout = Handout(on_wait=lambda: None)
    processors = [asyncio.create_task(handout.get()) for _ in range(3)]
    await _settle()
    handout.deliver([b"a", b"b", b"c"])  # burst 1: one now, the look wakes the rest
    await _settle()
    assert sorted([await p for p in processors]) == [b"a", b"b", b"c"]
    assert handout.burst > 1  # they awaited: wake more at once next time


async def test_jobs_taken_by_running_processors_teach_a_smaller_burst() -> None:
    handout = Handout(on_wait=lambda: None)
    handout.burst = 2
    waiters = [asyncio.create_task(handout.get()) for _ in range(3)]
    await _settle()
    handout.deliver([b"a", b"b", b"c"])  # two handed now, one left for the look
    assert await handout.get() == b"c"  # a running processor takes it itself
    await _settle()
    assert sorted([await w for w in waiters[:2]]) == [b"a", b"b"]
    assert handout.burst == 1  # quick: the next batch wakes fewer
    assert handout.waiting() == 1
    waiters[2].cancel()
