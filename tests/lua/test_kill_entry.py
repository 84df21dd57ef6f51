"""kill_entry.lua: a retry or schedule entry moved into dead in one step, the dead set trimmed."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import admin
from tests.lua.support import make_job

pytestmark = pytest.mark.anyio


async def kill(redis: Redis, keys: Keys, entry: bytes, now: float, cap: int = 100) -> bool:
    return await admin.kill_entry(
        redis,
        keys,
        source=keys.retry,
        entry=entry,
        dead_entry=entry,
        now=now,
        dead_max_jobs=cap,
        dead_timeout=1000.0,
    )


async def test_moves_once(redis: Redis, keys: Keys) -> None:
    job = make_job("mail")
    await redis.zadd(keys.retry, {job: 50.0})
    assert await kill(redis, keys, job, now=5000.0)
    assert not await kill(redis, keys, job, now=5001.0)  # already gone: nothing added again
    assert await redis.zrange(keys.retry, 0, -1) == []
    assert await redis.zrange(keys.dead, 0, -1, withscores=True) == [(job, 5000.0)]


async def test_trims_the_dead_set_by_age_and_count(redis: Redis, keys: Keys) -> None:
    old, kept, newer = make_job(), make_job(), make_job()
    await redis.zadd(keys.dead, {old: 3000.0, kept: 4500.0, newer: 4900.0})
    job = make_job("mail")
    await redis.zadd(keys.retry, {job: 1.0})
    assert await kill(redis, keys, job, now=5000.0, cap=2)
    # Older than now - dead_timeout goes, then the oldest past the cap.
    assert await redis.zrange(keys.dead, 0, -1) == [newer, job]
