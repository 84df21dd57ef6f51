"""The registries stay true: processes judged dead leave them, and only live ones count
(issue 11, item 4)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from cogworker_async import Settings, Worker
from cogworker_async.keys import Keys
from cogworker_async.worker.duties import live_processes
from tests.helpers import wait_for
from tests.lua.support import make_job, redis_now

pytestmark = pytest.mark.anyio

CRASHED = [f"host:{pid}:dead" for pid in range(100, 105)]


async def plant_crashed(redis: Redis, keys: Keys, *, with_jobs: bool) -> None:
    """Five processes SIGKILLed long ago: on every registry, presence keys long gone."""
    now = await redis_now(redis)
    for identity in CRASHED:
        await redis.sadd(keys.processes, identity)
        await redis.sadd(keys.in_progress_identities, identity)
        await redis.hset(keys.last_beat, identity, f"{now - 3600:.6f}")
        await redis.hset(keys.beating_since, identity, f"{now - 7200:.6f}")
        await redis.hset(keys.workers(identity), "0", "{}")
        if with_jobs:
            await redis.lpush(keys.in_progress(identity), make_job())


async def test_only_processes_with_a_presence_key_count_as_live(redis: Redis, keys: Keys) -> None:
    await plant_crashed(redis, keys, with_jobs=False)
    assert await live_processes(redis, keys) == 1  # none live: the caller itself
    await redis.set(keys.process("host:1:alive"), "{}", px=10_000)
    await redis.sadd(keys.processes, "host:1:alive")
    await redis.set(keys.process("host:2:alive"), "{}", px=10_000)
    await redis.sadd(keys.processes, "host:2:alive")
    assert await live_processes(redis, keys) == 2


@pytest.mark.parametrize("with_jobs", [False, True])
async def test_crashed_processes_leave_every_registry(
    settings: Settings, redis: Redis, keys: Keys, with_jobs: bool
) -> None:
    await plant_crashed(redis, keys, with_jobs=with_jobs)
    async with Worker(settings) as worker:

        async def only_me() -> bool:
            members = {m.decode() for m in await redis.smembers(keys.processes)}
            return members == {worker.identity}

        await wait_for(only_me, timeout=settings.orphan_threshold + 10)
        await wait_for(
            lambda: _registries_hold_none(redis, keys), timeout=settings.orphan_check_interval + 5
        )
        for identity in CRASHED:  # their jobs went back rather than being forgotten
            assert await redis.llen(keys.in_progress(identity)) == 0


async def _registries_hold_none(redis: Redis, keys: Keys) -> bool:
    for identity in CRASHED:
        if await redis.sismember(keys.in_progress_identities, identity):
            return False
        if await redis.hexists(keys.last_beat, identity):
            return False
        if await redis.hexists(keys.beating_since, identity):
            return False
        if await redis.exists(keys.workers(identity)):
            return False
    return True
