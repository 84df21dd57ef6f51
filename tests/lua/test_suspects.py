"""Jobs recovered from a dead process come back marked as suspects (run alone next time)."""

from __future__ import annotations

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.worker.processor import SUSPECT_PREFIX
from tests.lua.support import JUDGE_TTL, drain, enqueue, make_job, trust_judge

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
        judge=await trust_judge(redis, keys),
        judge_ttl=JUDGE_TTL,
    )


async def test_recovered_job_is_marked_and_otherwise_untouched(redis: Redis, keys: Keys) -> None:
    original = (
        b'{"jid": "x1",  "class":"t", "args":[1.5e300, 12345678901234567890], "queue":"default"}'
    )
    assert (await recover(redis, keys, original)).moved == 1
    (marked,) = await drain(redis, keys.queue("default"))
    assert marked.startswith(SUSPECT_PREFIX)
    assert marked == b'{"suspect":1,' + original[1:]  # every other byte as written
    assert orjson.loads(marked)["suspect"] == 1


async def test_a_second_recovery_does_not_mark_twice(redis: Redis, keys: Keys) -> None:
    await recover(redis, keys, make_job())
    (once,) = await drain(redis, keys.queue("default"))
    await recover(redis, keys, once)
    (twice,) = await drain(redis, keys.queue("default"))
    assert twice == once


async def test_odd_payloads_are_marked_safely(redis: Redis, keys: Keys) -> None:
    await recover(redis, keys, b"{ }", b"not json")
    popped = set(await drain(redis, keys.queue("default")))
    assert popped == {b'{"suspect":1}', b"not json"}


async def test_own_shutdown_requeue_marks_nothing(redis: Redis, keys: Keys) -> None:
    job = make_job()
    await redis.lpush(keys.in_progress(ME), job)
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
    assert await drain(redis, keys.queue("default")) == [job]


async def _fetch(redis: Redis, keys: Keys, want: int) -> list[bytes]:
    result = await commands.fetch(
        redis, keys, identity=ME, queues=["default"], want=want, acks=[], reliable=True
    )
    return result.jobs


async def test_a_suspect_is_always_alone_in_its_batch(redis: Redis, keys: Keys) -> None:
    first, later = make_job(), make_job()
    suspect = b'{"suspect":1,' + make_job()[1:]
    await enqueue(redis, keys, "default", first, suspect, later)  # popped in this order
    assert await _fetch(redis, keys, 5) == [first]  # stops before the suspect
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [first]
    assert await _fetch(redis, keys, 5) == [suspect]  # then the suspect, alone
    assert await _fetch(redis, keys, 5) == [later]
    assert await redis.llen(keys.queue("default")) == 0
