"""Jobs recovered from a dead process are suspects until they finish once."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import Ack, Filing
from tests.lua.support import enqueue, jid_of, make_job

pytestmark = pytest.mark.anyio

DEAD = "dead:1:aaa"
ME = "me:1:bbb"


async def recover(redis: Redis, keys: Keys, *jobs: bytes) -> commands.RequeueResult:
    await redis.lpush(keys.in_progress(DEAD), *jobs)
    return await commands.requeue(
        redis,
        keys,
        identity=DEAD,
        threshold=0.0,
        default_queue="default",
        max_orphanings=5,
        live_window=10.0,
    )


async def fetch(redis: Redis, keys: Keys, want: int, acks: list[Ack] | None = None):  # type: ignore[no-untyped-def]
    return await commands.fetch(
        redis, keys, identity=ME, queues=["default"], want=want, acks=acks or [], reliable=True
    )


async def test_recovered_jobs_become_suspects_and_fetch_flags_them(
    redis: Redis, keys: Keys
) -> None:
    orphan = make_job()
    fresh = make_job()
    result = await recover(redis, keys, orphan)
    assert result.moved == 1
    assert await redis.smembers(keys.suspects) == {orphan}
    assert await redis.ttl(keys.suspects) > 0
    await enqueue(redis, keys, "default", fresh)
    taken = await fetch(redis, keys, 5)
    assert set(taken.jobs) == {orphan, fresh}
    assert taken.suspects == frozenset({orphan})


async def test_ack_and_filing_clear_suspicion(redis: Redis, keys: Keys) -> None:
    first, second = make_job(), make_job()
    await recover(redis, keys, first, second)
    taken = await fetch(redis, keys, 5)
    assert taken.suspects == frozenset({first, second})
    await fetch(redis, keys, 0, acks=[Ack(first, jid_of(first))])
    assert await redis.smembers(keys.suspects) == {second}
    filing = Filing(second, jid_of(second), keys.retry, 1.0, second)
    assert await commands.file(
        redis, keys, identity=ME, filing=filing, dead_max_jobs=10, dead_timeout=100.0
    )
    assert await redis.exists(keys.suspects) == 0


async def test_own_shutdown_requeue_makes_no_suspects(redis: Redis, keys: Keys) -> None:
    await redis.lpush(keys.in_progress(ME), make_job())
    result = await commands.requeue(
        redis,
        keys,
        identity=ME,
        threshold=None,
        default_queue="default",
        max_orphanings=5,
        live_window=10.0,
    )
    assert result.moved == 1
    assert await redis.exists(keys.suspects) == 0


async def test_parked_repeat_orphan_is_no_longer_a_suspect(redis: Redis, keys: Keys) -> None:
    job = make_job()
    await redis.sadd(keys.suspects, job)
    await redis.set(keys.orphanings(jid_of(job)), 5)
    await recover(redis, keys, job)
    assert await redis.lrange(keys.repeat_orphans, 0, -1) == [job]
    assert await redis.exists(keys.suspects) == 0
