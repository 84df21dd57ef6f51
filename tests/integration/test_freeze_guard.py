"""The check after a heartbeat gap (worker/freeze.py), against a real Redis list.

The chaos test (tests/chaos/test_fair_dispatch.py) freezes a real worker;
here each rule is driven on its own: which thread sees the gap first, held
jobs recovery took back, a copy of a jid running here, basic fetch.
"""

from __future__ import annotations

import logging
import math
import time

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.worker.freeze import FreezeGuard
from cogworker_async.worker.handout import Handout

pytestmark = pytest.mark.anyio

ME = "host:1:frozen"
TTL = 0.3


def job(jid: str) -> bytes:
    return orjson.dumps({"jid": jid, "class": "x", "args": [], "queue": "q"})


def guard_for(
    redis: Redis, keys: Keys, handout: Handout, running: set[str], *, listed: bool = True
) -> FreezeGuard:
    return FreezeGuard(
        redis,
        keys,
        identity=ME,
        ttl=TTL,
        listed=listed,
        handout=handout,
        claimed=list,
        running_jids=lambda: set(running),
        logger=logging.getLogger("test.freeze"),
    )


async def held(redis: Redis, keys: Keys, handout: Handout, *jobs: bytes) -> None:
    """Jobs fetched ahead: on our list, and in the ready queue."""
    await redis.lpush(keys.in_progress(ME), *jobs)
    handout.deliver(jobs)


async def test_held_jobs_recovery_took_back_are_dropped_not_started(
    redis: Redis, keys: Keys
) -> None:
    handout = Handout(on_wait=lambda: None)
    guard = guard_for(redis, keys, handout, set())
    a, b, c = job("a"), job("b"), job("c")
    await held(redis, keys, handout, a, b, c)
    await anyio.sleep(TTL * 1.5)  # the freeze: no beat for longer than the TTL
    await redis.lrem(keys.in_progress(ME), 1, b)  # recovery took b back (it runs elsewhere)
    # The heartbeat thread runs first after the freeze: its beat lands before any start.
    guard.beaten(time.monotonic())
    assert time.monotonic() > guard.fresh_until  # left behind: the loop must still check
    first = await handout.get()
    assert first == a
    assert await guard.admit(a)
    assert list(handout.ready) == [c]  # b dropped from our hands
    assert guard.checks == 1
    assert time.monotonic() < guard.fresh_until  # checked: plain starts again
    assert await guard.admit(c)
    assert guard.checks == 1


async def test_a_job_taken_back_while_its_processor_waits_on_the_check_is_refused(
    redis: Redis, keys: Keys
) -> None:
    handout = Handout(on_wait=lambda: None)
    guard = guard_for(redis, keys, handout, set())
    a = job("a")
    await held(redis, keys, handout, a)
    await anyio.sleep(TTL * 1.5)
    await redis.delete(keys.in_progress(ME))  # recovered, list and all
    taken = await handout.get()
    assert taken is not None
    verdict: list[bool] = []
    async with anyio.create_task_group() as group:

        async def start() -> None:
            verdict.append(await guard.admit(taken))

        group.start_soon(start)
        await anyio.sleep(0.1)
        assert not verdict  # nothing starts before a beat has landed
        guard.beaten(time.monotonic())
    assert verdict == [False]


async def test_a_copy_of_a_jid_running_here_waits_for_that_run_to_end(
    redis: Redis, keys: Keys
) -> None:
    handout = Handout(on_wait=lambda: None)
    running = {"r"}
    guard = guard_for(redis, keys, handout, running)
    await anyio.sleep(TTL * 1.5)
    guard.beaten(time.monotonic())
    copy = job("r")  # requeued by recovery, fetched here again
    await redis.lpush(keys.in_progress(ME), copy)
    started = anyio.Event()
    async with anyio.create_task_group() as group:

        async def start() -> None:
            assert await guard.admit(copy)
            started.set()

        group.start_soon(start)
        await anyio.sleep(0.2)
        assert not started.is_set()  # "r" still runs here
        assert guard.watching
        running.clear()  # its run here ended
        with anyio.fail_after(5):
            await started.wait()
    assert not guard.watching  # nothing left to watch: plain starts again


async def test_basic_fetch_has_nothing_to_check(redis: Redis, keys: Keys) -> None:
    handout = Handout(on_wait=lambda: None)
    guard = guard_for(redis, keys, handout, set(), listed=False)
    assert guard.fresh_until == math.inf
    guard.beaten(time.monotonic() + 100)
    assert guard.fresh_until == math.inf
    assert not guard.watching


class FetchWhileReading:
    """A Redis whose in-progress read is overtaken by a fetch: after the server has
    answered the LRANGE, and before its reply is used, the fetcher lands a new job
    (on our list, and in the ready queue), as a real fetch on another connection can."""

    def __init__(self, redis: Redis, keys: Keys, handout: Handout, arrival: bytes) -> None:
        self._redis = redis
        self._keys = keys
        self._handout = handout
        self._arrival = arrival

    async def lrange(self, name: str, start: int, end: int) -> list[bytes]:
        listed: list[bytes] = await self._redis.lrange(name, start, end)
        await held(self._redis, self._keys, self._handout, self._arrival)
        return listed


async def test_a_job_fetched_while_the_check_reads_the_list_is_kept(
    redis: Redis, keys: Keys
) -> None:
    handout = Handout(on_wait=lambda: None)
    a, b, late = job("a"), job("b"), job("late")
    racing = FetchWhileReading(redis, keys, handout, late)
    guard = FreezeGuard(
        racing,  # type: ignore[arg-type]  # only lrange is read
        keys,
        identity=ME,
        ttl=TTL,
        listed=True,
        handout=handout,
        claimed=list,
        running_jids=set,
        logger=logging.getLogger("test.freeze"),
    )
    await held(redis, keys, handout, a, b)
    await anyio.sleep(TTL * 1.5)
    await redis.lrem(keys.in_progress(ME), 1, b)  # recovery took b back
    guard.beaten(time.monotonic())
    first = await handout.get()
    assert first == a
    assert await guard.admit(a)
    # b is gone from our hands; the job that landed during the read is ours and kept.
    assert list(handout.ready) == [late]
    assert await guard.admit(late)
    assert late in await redis.lrange(keys.in_progress(ME), 0, -1)
