"""A unique job's lock covers its whole life: a delayed job's lock counts its TTL
from when the job is due, and the run's start renews it (owner-checked) to
``unique_for`` from then, so neither a long wait nor a long delay lets a second
copy in beside it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.jobs import JobFunction
from cogworker_async.keys import Keys
from cogworker_async.unique import lock_key
from cogworker_async.unique.lock import digest
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

runs: list[str] = []
gate: dict[str, asyncio.Event] = {}


@job(name="wl.later", unique="until_executed", unique_for=30)
async def later(tag: str) -> None:
    runs.append(tag)


@job(name="wl.long", unique="until_executed", unique_for=30)
async def long_run(tag: str) -> None:
    runs.append(tag)
    await gate["go"].wait()


@job(name="wl.retry", unique="until_executed", unique_for=30, retry_in=lambda *_: 600)
async def retried(tag: str) -> None:
    runs.append(tag)
    raise ValueError("again, in 10 minutes")


ALL: list[JobFunction[Any, Any]] = [later, long_run, retried]


@pytest.fixture(autouse=True)
def _clear() -> None:
    runs.clear()
    gate["go"] = asyncio.Event()


def key_of(keys: Keys, name: str, *args: object) -> str:
    return lock_key(keys, name, digest(name, args, {}, "default"))


async def test_a_delayed_jobs_lock_counts_from_when_it_is_due(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        first = await client.enqueue(later.options(delay=600), "d")
        await client.enqueue_many(later.options(delay=900), [("m",)])
        assert first is not None
        # The lock lasts the delay plus unique_for: a duplicate sent before the
        # first is due (and until 30 s after) is refused.
        ttl = await redis.pttl(key_of(keys, "wl.later", "d"))
        assert 600_000 + 25_000 < ttl <= 630_000, ttl
        ttl_many = await redis.pttl(key_of(keys, "wl.later", "m"))
        assert 900_000 + 25_000 < ttl_many <= 930_000, ttl_many
        dup = await client.enqueue(later.options(delay=600), "d")
        assert dup is not None
        assert dup.duplicate
        assert dup.holder == first.jid


async def _ran(n: int) -> bool:
    return len(runs) >= n


async def test_the_run_start_renews_the_lock_for_unique_for(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    """The job waited longer than unique_for (its lock ran out): its start takes the
    lock again for unique_for, so a duplicate sent while it runs is refused."""
    lock = key_of(keys, "wl.long", "w")
    async with Client(settings) as client:
        first = await client.enqueue(long_run, "w")
        assert first is not None
        await redis.delete(lock)  # the wait outlived unique_for
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _ran(1))
            assert await redis.get(lock) == first.jid.encode()
            assert 25_000 < await redis.pttl(lock) <= 30_000
            dup = await client.enqueue(long_run, "w")
            assert dup is not None
            assert dup.duplicate
            assert dup.holder == first.jid
            gate["go"].set()
            await wait_for(lambda: _gone(redis, lock))
    assert runs == ["w"]


async def test_the_run_start_extends_a_lock_about_to_run_out(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    lock = key_of(keys, "wl.long", "x")
    async with Client(settings) as client:
        first = await client.enqueue(long_run, "x")
        assert first is not None
        await redis.pexpire(lock, 60_000_000)  # renewed to unique_for, not kept longer
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _ran(1))
            assert 25_000 < await redis.pttl(lock) <= 30_000
            gate["go"].set()
            await wait_for(lambda: _gone(redis, lock))


async def test_the_run_start_leaves_a_newer_copys_lock_alone(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    lock = key_of(keys, "wl.long", "n")
    async with Client(settings) as client:
        first = await client.enqueue(long_run, "n")
        assert first is not None
        await redis.set(lock, "newer-copy", px=50_000)
        with caplog.at_level(logging.WARNING):
            async with Worker(settings, jobs=ALL):
                await wait_for(lambda: _ran(1))
                assert await redis.get(lock) == b"newer-copy"
                assert 0 < await redis.pttl(lock) <= 50_000
                gate["go"].set()
    assert await redis.get(lock) == b"newer-copy"  # the old copy's success left it too
    assert any(
        first.jid in r.getMessage() and "newer-copy" in r.getMessage() for r in caplog.records
    )


async def _gone(redis: Redis, key: str) -> bool:
    return not await redis.exists(key)


async def test_a_retry_keeps_the_lock_for_its_delay_plus_unique_for(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    lock = key_of(keys, "wl.retry", "r")
    async with Client(settings) as client:
        first = await client.enqueue(retried, "r")
        assert first is not None
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _in_retry(redis, keys))
        assert await redis.get(lock) == first.jid.encode()
        assert 600_000 + 25_000 < await redis.pttl(lock) <= 630_000
        dup = await client.enqueue(retried, "r")
        assert dup is not None
        assert dup.duplicate


async def _in_retry(redis: Redis, keys: Keys) -> bool:
    return await redis.zcard(keys.retry) == 1
