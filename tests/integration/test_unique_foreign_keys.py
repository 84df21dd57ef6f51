"""A payload names its lock key, and a payload is data: no path writes a key it names
unless that key is a lock under ``<ns>:unique:``. A dead entry retried by an
operator, an entry deleted or killed, a job a worker runs, a job aborted while
it waits: each leaves a key outside the prefix alone (and says so), even one
whose value happens to equal the job's jid."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, api, job
from cogworker_async.keys import Keys
from cogworker_async.payload import new_jid
from cogworker_async.store import admin
from cogworker_async.unique import DeferredReleases, Release
from cogworker_async.unique.lock import releases_key
from tests.helpers import wait_for
from tests.lua.support import make_job

pytestmark = pytest.mark.anyio

ran: list[str] = []


@job(name="fk.run", unique="until_executed")
async def run_it(tag: str) -> None:
    ran.append(tag)


def foreign_job(keys: Keys, target: str, queue: str = "default") -> tuple[bytes, str]:
    jid = new_jid()
    unique = {"key": target, "mode": "until_executed", "for": 60}
    raw = make_job(queue, jid=jid, unique=unique, **{"class": "fk.run", "args": ["f"]})
    return raw, jid


async def test_retrying_a_dead_entry_never_sets_a_key_outside_the_prefix(
    redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    raw, jid = foreign_job(keys, keys.paused)
    await redis.zadd(keys.dead, {raw: time.time()})
    with caplog.at_level(logging.WARNING):
        assert await api.retry_now(redis, keys, "dead", [jid]) == 1
    assert not await redis.exists(keys.paused)  # the retry wrote no such key
    assert await redis.llen(keys.queue("default")) == 1
    assert any(keys.paused in r.getMessage() and jid in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("how", ["delete", "delete_all", "kill", "abort"])
async def test_removals_never_delete_a_key_outside_the_prefix(
    settings: Settings, redis: Redis, keys: Keys, how: str
) -> None:
    target = keys.recovery_lock  # a key of ours whose value a payload could mimic
    raw, jid = foreign_job(keys, target)
    await redis.set(target, jid)
    if how == "delete":
        await redis.zadd(keys.dead, {raw: time.time()})
        assert await api.delete(redis, keys, "dead", [jid]) == 1
    elif how == "delete_all":
        await redis.zadd(keys.retry, {raw: time.time()})
        assert await api.delete_all(redis, keys, "retry") == 1
    elif how == "kill":
        await redis.zadd(keys.retry, {raw: time.time()})
        assert await admin.kill_entry(
            redis,
            keys,
            source=keys.retry,
            entry=raw,
            dead_entry=raw,
            now=time.time(),
            dead_max_jobs=100,
            dead_timeout=3600,
        )
    else:
        await redis.zadd(keys.schedule, {raw: time.time() + 600})
        async with Client(settings) as client:
            assert await client.abort(jid)
        assert not await redis.zcard(keys.schedule)
    assert await redis.get(target) == jid.encode()


async def test_a_worker_never_touches_a_key_outside_the_prefix(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    target = f"{keys.ns}:not-a-lock"
    raw, jid = foreign_job(keys, target)
    await redis.set(target, jid)
    await redis.sadd(keys.queues, "default")
    await redis.lpush(keys.queue("default"), raw)
    ran.clear()
    with caplog.at_level(logging.ERROR):
        async with Worker(settings, jobs=[run_it]):
            await wait_for(lambda: _drained(redis, keys))
    assert ran
    assert await redis.get(target) == jid.encode()  # not renewed, not released
    assert await redis.ttl(target) == -1
    assert any(target in r.getMessage() and jid in r.getMessage() for r in caplog.records)


async def _drained(redis: Redis, keys: Keys) -> bool:
    await asyncio.sleep(0)
    return not await redis.llen(keys.queue("default")) and ran != []


async def test_a_handed_over_release_outside_the_prefix_is_dropped(
    redis: Redis, keys: Keys
) -> None:
    target = f"{keys.ns}:not-a-lock"
    await redis.set(target, "j1")
    await redis.rpush(releases_key(keys), orjson.dumps({"key": target, "jid": "j1"}))
    releases = DeferredReleases(redis, keys, logging.getLogger("test"))
    assert await releases.once() == 0
    assert await redis.get(target) == b"j1"
    assert Release(target, "j1") not in releases.pending


async def test_enqueue_refuses_a_lock_key_a_middleware_moved_outside(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async def redirect(job: dict[str, Any]) -> dict[str, Any]:
        job["unique"]["key"] = keys.paused
        return job

    async with Client(settings, middleware=[redirect]) as client:
        with pytest.raises(ValueError, match=r"unique\.key must be a lock key under"):
            await client.enqueue(run_it, "m")
        with pytest.raises(ValueError, match=r"unique\.key must be a lock key under"):
            await client.enqueue_many(run_it, [("m",)])
    assert not await redis.exists(keys.paused)
    assert not await redis.llen(keys.queue("default"))
