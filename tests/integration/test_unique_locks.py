"""Unique locks an operator sees and deletes (``locks`` CLI, ``api.locks``), and
releases that fail: retried by the worker, handed over at shutdown, never left to the TTL."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import orjson
import pytest
import redis as sync_redis
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, api, job
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.unique import DeferredReleases, Release
from cogworker_async.unique.lock import releases_key
from tests.faultproxy import FaultProxy
from tests.helpers import wait_for
from tests.integration.test_cli import cli
from tests.lua.support import make_job

pytestmark = pytest.mark.anyio

runs: list[str] = []
proxy_box: dict[str, FaultProxy] = {}


@job(name="ul.cut", unique="until_executed")
async def cut_after(tag: str) -> None:
    """Succeeds, and Redis vanishes before its lock can be released."""
    runs.append(tag)
    proxy_box["proxy"].refuse(True)


@pytest.fixture(autouse=True)
def _clear() -> None:
    runs.clear()


def _seed(client: sync_redis.Redis, keys: Keys) -> dict[str, str]:
    """Three locks: one whose job is queued, one whose job is in progress, one orphan."""
    queued, working, orphan = (make_job("default") for _ in range(3))
    jids = {
        name: orjson.loads(raw)["jid"]
        for name, raw in (("queued", queued), ("working", working), ("orphan", orphan))
    }
    client.sadd(keys.queues, "default")
    client.lpush(keys.queue("default"), queued)
    client.sadd(keys.in_progress_identities, "host:1:x")
    client.lpush(keys.in_progress("host:1:x"), working)
    for name, jid in jids.items():
        client.set(keys.unique(f"jobs.{name}:abc"), jid, ex=600)
    client.rpush(releases_key(keys), b'{"key":"x","jid":"y"}')  # not a lock: never listed
    return jids


def test_locks_cli(settings: Settings, sync_client: sync_redis.Redis, keys: Keys) -> None:
    jids = _seed(sync_client, keys)
    done = cli(settings, "locks", "list", "--json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [(lock["name"], lock["holder"]) for lock in listed] == [
        ("jobs.orphan", jids["orphan"]),
        ("jobs.queued", jids["queued"]),
        ("jobs.working", jids["working"]),
    ]
    assert all(0 < lock["ttl"] <= 600 for lock in listed)
    text = cli(settings, "locks", "list", "--name", "jobs.queued")
    assert text.returncode == 0
    assert "jobs.queued" in text.stdout
    assert "orphan" not in text.stdout

    refused = cli(settings, "locks", "delete-orphaned")
    assert refused.returncode == 2  # not a terminal, no --yes
    done = cli(settings, "locks", "delete-orphaned", "--yes")
    assert done.returncode == 0, done.stderr
    assert "1 orphaned lock deleted" in done.stdout
    assert not sync_client.exists(keys.unique("jobs.orphan:abc"))
    assert sync_client.exists(keys.unique("jobs.queued:abc"))
    assert sync_client.exists(keys.unique("jobs.working:abc"))

    done = cli(settings, "locks", "delete", keys.unique("jobs.queued:abc"))
    assert done.returncode == 0, done.stderr
    assert not sync_client.exists(keys.unique("jobs.queued:abc"))
    missing = cli(settings, "locks", "delete", "jobs.nothing:abc")
    assert missing.returncode == 1
    assert sync_client.exists(releases_key(keys))


async def test_api_delete_orphaned_keeps_live_locks(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    @job(name="ul.live", unique="until_executed")
    async def live(n: int) -> None: ...

    async with Client(settings) as client:
        await client.enqueue(live, 1)
        await client.enqueue(live.options(delay=600), 2)
    await redis.set(keys.unique("ul.live:gone"), "0" * 24, ex=60)
    deleted = await api.delete_orphaned(redis, keys)
    assert [lock.key for lock in deleted] == [keys.unique("ul.live:gone")]
    assert len(await api.list_locks(redis, keys)) == 2


@pytest.fixture
def proxy(redis_server: EmbeddedRedis) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", redis_server.port or 0) as fault_proxy:
        proxy_box["proxy"] = fault_proxy
        yield fault_proxy


async def _gone(redis: Redis, key: str) -> bool:
    return not await redis.exists(key)


async def test_release_with_a_lost_ack_lands_with_it(
    settings: Settings, proxy: FaultProxy, redis: Redis, keys: Keys
) -> None:
    """A success's release rides in its ack: Redis gone before the ack is sent,
    both wait, and land together when it is back."""
    proxied = settings.model_copy(update={"redis_url": proxy.url})
    async with Client(settings) as client:
        handle = await client.enqueue(cut_after, "once")
    assert handle is not None
    lock = (await api.list_locks(redis, keys))[0].key
    worker = Worker(proxied, jobs=[cut_after])
    async with worker:
        await wait_for(lambda: _ran(1))
        assert await redis.get(lock) == handle.jid.encode()  # the ack (and release) wait
        assert await redis.llen(keys.in_progress(worker.identity)) == 1
        proxy.heal()
        await wait_for(lambda: _gone(redis, lock))
        assert await redis.llen(keys.in_progress(worker.identity)) == 0
    assert runs == ["once"]


async def _ran(n: int) -> bool:
    return len(runs) >= n


async def test_failed_release_is_retried_and_lands(
    settings: Settings, proxy: FaultProxy, redis: Redis, keys: Keys
) -> None:
    """A release that fails (until_executing's at run start, an ack dropped at
    shutdown) is kept and retried by the worker's duty until it lands."""
    proxied = Redis.from_url(proxy.url, socket_timeout=2)
    try:
        releases = DeferredReleases(proxied, keys, logging.getLogger("test"))
        lock = keys.unique("x:retried")
        await redis.set(lock, "a" * 24)
        proxy.refuse(True)
        await releases.release(Release(lock, "a" * 24))
        assert Release(lock, "a" * 24) in releases.pending
        with pytest.raises(Exception):  # noqa: B017 - still away: the pass fails
            await releases.once()
        assert await redis.exists(lock)
        proxy.heal()
        assert await releases.once() == 0
        assert not await redis.exists(lock)
        assert releases.released == 1
    finally:
        await proxied.aclose()


async def test_releases_handed_over_at_shutdown_are_made_by_the_next(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    log = logging.getLogger("test")
    await redis.set(keys.unique("x:1"), "a" * 24)
    await redis.set(keys.unique("x:2"), "b" * 24)
    await redis.set(keys.unique("x:3"), "newer")
    stopping = DeferredReleases(redis, keys, log)
    for lock, jid in (("x:1", "a" * 24), ("x:2", "b" * 24), ("x:3", "c" * 24)):
        stopping.defer(Release(keys.unique(lock), jid))
    await stopping.hand_over()
    assert not stopping.pending
    assert await redis.llen(releases_key(keys)) == 3
    assert await redis.exists(keys.unique("x:1"))  # nothing released by handing over

    async with Worker(settings, jobs=[cut_after]):
        await wait_for(lambda: _gone(redis, keys.unique("x:2")))
    assert not await redis.exists(keys.unique("x:1"))
    assert await redis.get(keys.unique("x:3")) == b"newer"  # owner-checked
    assert await redis.llen(releases_key(keys)) == 0
