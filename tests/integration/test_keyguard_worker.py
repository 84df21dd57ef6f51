"""A running worker quarantines wrong-typed keys of each kind and keeps processing."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.keys import Keys
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

done: list[int] = []


@job(name="kg.step")
async def step(i: int) -> None:
    done.append(i)


@job(name="kg.boom", retry=3)
async def boom() -> None:
    raise ValueError("needs the retry set")


async def _has(n: int) -> bool:
    return len(done) >= n


async def test_wrong_typed_keys_are_quarantined_while_jobs_flow(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    done.clear()
    await redis.set(keys.retry, "a string where a sorted set belongs")
    await redis.rpush(keys.in_progress_identities, "a list where a set belongs")
    await redis.hset(keys.queue("other"), "a", "hash where a list belongs")
    both = settings.model_copy(update={"queues": ("default", "other"), "key_check_interval": 0.5})
    async with Client(both) as client:
        await client.enqueue_many(step, [(i,) for i in range(50)])
        await client.enqueue(boom)
        async with Worker(both, jobs=[step, boom]):
            await wait_for(lambda: _has(50), timeout=20)
            await client.enqueue_many(step, [(i,) for i in range(50, 100)])
            await wait_for(lambda: _has(100), timeout=20)
            await wait_for(lambda: _zcard(redis, keys.retry, 1), timeout=20)
    for key, found in (
        (keys.retry, b"string"),
        (keys.in_progress_identities, b"list"),
        (keys.queue("other"), b"hash"),
    ):
        assert await redis.type(keys.quarantine(key)) == found, key
        assert await redis.ttl(keys.quarantine(key)) > 0
    assert "quarantine" in caplog.text
    assert sorted(done) == list(range(100))


async def _zcard(redis: Redis, key: str, n: int) -> bool:
    return await redis.type(key) == b"zset" and await redis.zcard(key) >= n


@job(name="kg.tracked", status=True)
async def tracked(i: int) -> None:
    done.append(i)


async def test_a_status_key_of_the_wrong_type_is_moved_aside_within_seconds(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    """A job's status key (one per job: no pass lists them) said WRONGTYPE to the
    worker's status write: the write reports it, and the guard moves it aside long
    before key_check_interval (300 s); the job itself ran."""
    done.clear()
    async with Client(settings) as client:
        handle = await client.enqueue(tracked, 1)
        assert handle is not None
        status = keys.status(handle.jid)
        await redis.delete(status)
        await redis.rpush(status, "a list where a hash belongs")
        async with Worker(settings, jobs=[tracked]):
            await wait_for(lambda: _has(1), timeout=20)

            async def moved() -> bool:
                return await redis.type(keys.quarantine(status)) == b"list"

            await wait_for(moved, timeout=20)
    assert done == [1]
