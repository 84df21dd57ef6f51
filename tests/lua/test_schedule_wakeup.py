"""The scheduled poller's wake-up marker: schedule.lua (delayed enqueue) and file.lua
(retries) touch it only for an entry due before everything already in its set."""

from __future__ import annotations

import time

import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import Filing
from cogworker_async.store.scripts import script
from tests.lua.support import enqueue, jid_of, make_job

pytestmark = pytest.mark.anyio

ME = "host:3:me"


async def _schedule(redis: Redis, keys: Keys, *pairs: float | bytes) -> int:
    result = await script("schedule").run(redis, [keys.schedule, keys.schedule_wakeup], pairs)
    return int(result)


async def _marker(redis: Redis, keys: Keys) -> list[tuple[bytes, float]]:
    return await redis.zrange(keys.schedule_wakeup, 0, -1, withscores=True)  # type: ignore[no-any-return]


async def test_schedule_adds_and_marks_the_earliest_due_time(redis: Redis, keys: Keys) -> None:
    first, second = make_job(), make_job()
    assert await _schedule(redis, keys, 200.5, first) == 1
    assert await redis.zrange(keys.schedule, 0, -1, withscores=True) == [(first, 200.5)]
    assert await _marker(redis, keys) == [(b"1", 200.5)]
    # Later than what is there: no touch (the poller finds it after the earlier one).
    assert await _schedule(redis, keys, 300.0, second) == 1
    assert await _marker(redis, keys) == [(b"1", 200.5)]


async def test_schedule_touches_for_an_earlier_entry_even_after_a_pop(
    redis: Redis, keys: Keys
) -> None:
    await _schedule(redis, keys, 200.0, make_job())
    await redis.bzpopmin([keys.schedule_wakeup], 1)  # a poller took it
    assert await _marker(redis, keys) == []
    await _schedule(redis, keys, 250.0, make_job())
    assert await _marker(redis, keys) == []
    await _schedule(redis, keys, 150.0, make_job(), 400.0, make_job())
    assert await _marker(redis, keys) == [(b"1", 150.0)]
    # Two untaken touches keep the earlier time (ZADD LT).
    await redis.zadd(keys.schedule_wakeup, {"1": 100.0})
    await _schedule(redis, keys, 120.0, make_job())
    assert await _marker(redis, keys) == [(b"1", 100.0)]


async def test_a_wrong_typed_marker_never_fails_the_enqueue(redis: Redis, keys: Keys) -> None:
    await redis.set(keys.schedule_wakeup, "not a zset")
    entry = make_job()
    assert await _schedule(redis, keys, 10.0, entry) == 1
    assert await redis.zrange(keys.schedule, 0, -1) == [entry]


async def _fail(redis: Redis, keys: Keys, target: str, score: float) -> bytes:
    raw = make_job("q")
    await enqueue(redis, keys, "q", raw)
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["q"], want=1, acks=[], reliable=True
    )
    assert got.jobs == [raw]
    filing = Filing(raw=raw, jid=jid_of(raw), target=target, score=score, entry=raw)
    assert await commands.file(
        redis, keys, identity=ME, filing=filing, dead_max_jobs=100, dead_timeout=1e9
    )
    return raw


async def test_a_retry_due_first_wakes_the_poller(redis: Redis, keys: Keys) -> None:
    await _fail(redis, keys, keys.retry, 500.0)
    assert await _marker(redis, keys) == [(b"1", 500.0)]
    await redis.delete(keys.schedule_wakeup)
    await _fail(redis, keys, keys.retry, 600.0)  # behind the first: no touch
    assert await _marker(redis, keys) == []
    await _fail(redis, keys, keys.retry, 400.0)
    assert await _marker(redis, keys) == [(b"1", 400.0)]
    assert await redis.zcard(keys.retry) == 3


async def test_a_job_filed_dead_does_not_wake_the_poller(redis: Redis, keys: Keys) -> None:
    await _fail(redis, keys, keys.dead, time.time())
    assert await redis.zcard(keys.dead) == 1
    assert await _marker(redis, keys) == []
