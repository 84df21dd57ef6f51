"""Unique jobs end to end: one job per lock, the duplicate told who holds it, the lock
released (owner-checked) on every terminal path."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, api, job
from cogworker_async.jobs import JobFunction
from cogworker_async.keys import Keys
from cogworker_async.unique import DEFAULT_UNIQUE_FOR, lock_key
from cogworker_async.unique.lock import digest
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

runs: list[str] = []
gate: dict[str, asyncio.Event] = {}


@job(name="uq.sync", unique="until_executed")
async def sync_account(account: int) -> None:
    runs.append(f"sync {account}")


@job(name="uq.boom", unique="until_executed", retry=0)
async def boom(tag: str) -> None:
    runs.append(tag)
    raise ValueError("boom")


@job(name="uq.discard", unique="until_executed", retry=False)
async def discard(tag: str) -> None:
    runs.append(tag)
    raise ValueError("discarded")


@job(name="uq.retry", unique="until_executed", retry=5)
async def retried(tag: str) -> None:
    runs.append(tag)
    raise ValueError("again")


@job(name="uq.executing", unique="until_executing", unique_for=60)
async def executing(tag: str) -> None:
    runs.append(tag)
    await gate["go"].wait()


@job(name="uq.by_key", unique="until_executed", unique_key=lambda user, **_: user)
async def by_key(user: int, note: str = "") -> None:
    runs.append(f"{user} {note}")


ALL: list[JobFunction[Any, Any]] = [sync_account, boom, discard, retried, executing, by_key]


@pytest.fixture(autouse=True)
def _clear() -> None:
    runs.clear()
    gate["go"] = asyncio.Event()


def key_of(keys: Keys, name: str, *args: object, queue: str = "default") -> str:
    return lock_key(keys, name, digest(name, args, {}, queue))


async def test_duplicate_enqueue_names_the_holder(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        first = await client.enqueue(sync_account, 7)
        second = await client.enqueue(sync_account, 7)
        other = await client.enqueue(sync_account, 8)
    assert first is not None
    assert second is not None
    assert other is not None
    assert not first.duplicate
    assert first.holder is None
    assert second.duplicate
    assert second.holder == first.jid == second.jid
    assert not other.duplicate
    assert await redis.llen(keys.queue("default")) == 2
    lock = key_of(keys, "uq.sync", 7)
    assert lock.startswith(f"{keys.ns}:unique:uq.sync:")
    assert await _holder(redis, lock) == first.jid
    ttl = await redis.pttl(lock)
    assert DEFAULT_UNIQUE_FOR * 1000 - 5000 < ttl <= DEFAULT_UNIQUE_FOR * 1000
    raw = (await redis.lrange(keys.queue("default"), -1, -1))[0]
    assert orjson.loads(raw)["unique"] == {
        "key": lock,
        "mode": "until_executed",
        "for": DEFAULT_UNIQUE_FOR,
    }


async def test_options_and_unique_key(settings: Settings, redis: Redis, keys: Keys) -> None:
    async with Client(settings) as client:
        first = await client.enqueue(by_key, 1, note="a")
        second = await client.enqueue(by_key, 1, note="b")  # same user: same key
        plain = await client.enqueue(sync_account.options(unique_for=5, queue="q2"), 9)
        again = await client.enqueue(sync_account.options(queue="q2"), 9)
    assert first is not None
    assert second is not None
    assert plain is not None
    assert again is not None
    assert second.duplicate
    assert second.holder == first.jid
    assert again.duplicate
    assert again.holder == plain.jid
    assert 0 < await redis.pttl(key_of(keys, "uq.sync", 9, queue="q2")) <= 5000


async def test_plain_jobs_carry_no_unique_field(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    @job(name="uq.plain")
    async def plain() -> None: ...

    async with Client(settings) as client:
        await client.enqueue(plain)
        await client.enqueue(plain)
    jobs = await redis.lrange(keys.queue("default"), 0, -1)
    assert len(jobs) == 2
    assert all("unique" not in orjson.loads(raw) for raw in jobs)


async def test_enqueue_many_reports_the_skipped(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        held = await client.enqueue(sync_account, 2)
        assert held is not None
        result = await client.enqueue_many(sync_account, [(1,), (2,), (3,), (1,)])
    assert len(result) == 2
    assert [position for position, _ in result.skipped] == [1, 3]
    assert result.skipped[0][1] == held.jid
    assert result.skipped[1][1] == result[0]  # the batch's own first (1,)
    assert await redis.llen(keys.queue("default")) == 3


async def test_concurrent_enqueues_make_one_job(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    clients = [Client(settings) for _ in range(5)]
    try:
        handles = await asyncio.gather(
            *(c.enqueue(sync_account, 42) for c in clients for _ in range(10))
        )
    finally:
        for c in clients:
            await c.close()
    winners = [h for h in handles if h is not None and not h.duplicate]
    assert len(winners) == 1
    assert {h.holder for h in handles if h is not None and h.duplicate} == {winners[0].jid}
    assert await redis.llen(keys.queue("default")) == 1


async def test_scheduled_unique_job(settings: Settings, redis: Redis, keys: Keys) -> None:
    async with Client(settings) as client:
        first = await client.enqueue(sync_account.options(delay=3600), 5)
        second = await client.enqueue(sync_account, 5)
    assert first is not None
    assert second is not None
    assert second.duplicate
    assert second.holder == first.jid
    assert await redis.zcard(keys.schedule) == 1
    assert await redis.llen(keys.queue("default")) == 0


async def _gone(redis: Redis, key: str) -> bool:
    return not await redis.exists(key)


async def test_released_after_success(settings: Settings, redis: Redis, keys: Keys) -> None:
    lock = key_of(keys, "uq.sync", 1)
    async with Client(settings) as client:
        await client.enqueue(sync_account, 1)
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _gone(redis, lock))
            again = await client.enqueue(sync_account, 1)
            assert again is not None
            assert not again.duplicate
    assert runs.count("sync 1") >= 1


@pytest.mark.parametrize(
    ("failing", "arg", "in_dead"),
    [(boom, "x", 1), (discard, "d", 0)],
    ids=["after the last failure", "after a discard"],
)
async def test_released_when_a_failure_is_terminal(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    failing: JobFunction[Any, Any],
    arg: str,
    in_dead: int,
) -> None:
    lock = key_of(keys, failing.name, arg)
    async with Client(settings) as client:
        await client.enqueue(failing, arg)
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _gone(redis, lock))
    assert await redis.zcard(keys.dead) == in_dead
    assert runs == [arg]


async def test_kept_while_retrying(settings: Settings, redis: Redis, keys: Keys) -> None:
    lock = key_of(keys, "uq.retry", "r")
    async with Client(settings) as client:
        handle = await client.enqueue(retried, "r")
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _zcard(redis, keys.retry, 1))
        assert handle is not None
        assert await _holder(redis, lock) == handle.jid
        dup = await client.enqueue(retried, "r")
        assert dup is not None
        assert dup.holder == handle.jid


async def _zcard(redis: Redis, key: str, n: int) -> bool:
    return await redis.zcard(key) >= n


async def test_until_executing_released_at_start(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    lock = key_of(keys, "uq.executing", "e")
    async with Client(settings) as client:
        first = await client.enqueue(executing, "e")
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _ran(1))
            assert not await redis.exists(lock)  # released before the handler ran
            second = await client.enqueue(executing, "e")  # while the first still runs
            assert second is not None
            assert not second.duplicate
            assert first is not None
            assert second.jid != first.jid
            gate["go"].set()
            await wait_for(lambda: _ran(2))
            await wait_for(lambda: _gone(redis, lock))


async def _ran(n: int) -> bool:
    return len(runs) >= n


async def test_old_copy_never_releases_a_newer_lock(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    """The old copy's lock ran out while it waited; a newer copy holds the key now.
    The old one's success must leave the newer lock alone."""
    lock = key_of(keys, "uq.sync", 3)
    async with Client(settings) as client:
        old = await client.enqueue(sync_account, 3)
        assert old is not None
        await redis.delete(lock)  # as if its TTL ran out
        new = await client.enqueue(sync_account, 3)
        assert new is not None
        assert not new.duplicate
        # Only the old copy runs: the new one waits on a queue no worker reads.
        raw_new = (await redis.lrange(keys.queue("default"), 0, 0))[0]
        await redis.lrem(keys.queue("default"), 1, raw_new)  # type: ignore[arg-type]
        await redis.lpush(keys.queue("parked"), raw_new)
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _ran(1))
            await wait_for(lambda: _queue_empty(redis, keys))
        assert await _holder(redis, lock) == new.jid


async def _queue_empty(redis: Redis, keys: Keys) -> bool:
    return await redis.llen(keys.queue("default")) == 0


async def test_operator_delete_and_clear_release(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        scheduled = await client.enqueue(sync_account.options(delay=3600), 10)
        await client.enqueue(sync_account, 11)
        await client.enqueue(sync_account, 12)
        await client.enqueue(sync_account.options(delay=3600), 13)
    assert scheduled is not None
    assert await api.delete(redis, keys, "schedule", [scheduled.jid]) == 1
    assert not await redis.exists(key_of(keys, "uq.sync", 10))
    assert await redis.exists(key_of(keys, "uq.sync", 13))
    assert await api.clear_queue(redis, keys, "default") == 2
    assert not await redis.exists(key_of(keys, "uq.sync", 11))
    assert not await redis.exists(key_of(keys, "uq.sync", 12))
    assert await api.delete_all(redis, keys, "schedule") == 1
    assert not await redis.exists(key_of(keys, "uq.sync", 13))


async def test_dead_delete_releases_a_lock_left_by_a_failed_release(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    """A dead job whose lock is still held (its release was lost): deleting it frees it."""
    async with Client(settings) as client:
        await client.enqueue(boom, "y")
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _zcard(redis, keys.dead, 1))
    lock = key_of(keys, "uq.boom", "y")
    entry = orjson.loads((await redis.zrange(keys.dead, 0, 0))[0])  # type: ignore[arg-type]
    await redis.set(lock, entry["jid"])  # lost release, simulated
    assert await api.delete_all(redis, keys, "dead") == 1
    assert not await redis.exists(lock)


async def _holder(redis: Redis, key: str) -> str:
    value = await redis.get(key)
    assert isinstance(value, bytes)
    return value.decode()


async def test_operator_retry_from_dead_takes_the_lock_again(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    lock = key_of(keys, "uq.boom", "z")
    async with Client(settings) as client:
        first = await client.enqueue(boom, "z")
        assert first is not None
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _zcard(redis, keys.dead, 1))
            await wait_for(lambda: _gone(redis, lock))
        assert await api.retry_now(redis, keys, "dead", [first.jid]) == 1
        assert await _holder(redis, lock) == first.jid
        dup = await client.enqueue(boom, "z")
        assert dup is not None
        assert dup.duplicate
        assert dup.holder == first.jid
        await redis.set(lock, "newer-copy")
        requeued = await redis.rpop(keys.queue("default"))
        assert isinstance(requeued, bytes)
        await redis.zadd(keys.dead, {requeued: 1})  # as if it failed again
        assert await api.retry_now(redis, keys, "dead", [first.jid]) == 1
        assert await _holder(redis, lock) == "newer-copy"  # not ours to take
