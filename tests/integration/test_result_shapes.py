"""A kept result's two shapes (``store/results.py``), read alike by every reader.

One key (a success's ack since the one-key shape): the envelope carries
``gone_for`` and its key's last ``gone_for`` s say only that the job finished.
Two keys (the rarer ends, and workers before it, during a rolling upgrade):
the list, and the ``result_gone`` marker beside it. Each is read by the
Client's waiters, the cluster's blocking wait and the web/CLI lookup: a kept
result gives its value, one past its keeping says ``ResultExpired`` at once.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings
from cogworker_async.api.lookup import kept_result
from cogworker_async.client.results import wait_blocking
from cogworker_async.errors import ResultExpired
from cogworker_async.keys import Keys
from cogworker_async.store import results
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

# shape -> kept? The one-key key's TTL says which: above gone_for (60 s) it is kept.
SHAPES = {
    "one key, kept": True,
    "one key, past its keeping": False,
    "two keys, kept": True,
    "two keys, only the marker left": False,
}


async def _write(redis: Redis, keys: Keys, shape: str, value: object) -> str:
    jid = uuid.uuid4().hex[:24]
    key = keys.result(jid)
    if shape.startswith("one key"):
        await redis.rpush(key, results.encode_success(value, gone_for=60))
        await redis.expire(key, 90 if shape.endswith("kept") else 30)
    else:  # as a worker before the one-key shape wrote it (queue_result: still written)
        await redis.rpush(key, results.encode_success(value))
        await redis.expire(key, 60)
        await redis.set(keys.result_gone(jid), b"1", ex=120)
        if not shape.endswith("kept"):
            await redis.delete(key)
    return jid


@pytest.mark.parametrize("shape", SHAPES)
async def test_the_waiters_read_both_shapes(
    settings: Settings, redis: Redis, keys: Keys, shape: str
) -> None:
    jid = await _write(redis, keys, shape, {"n": 7})
    async with Client(settings) as client:
        loop = asyncio.get_running_loop()
        began = loop.time()
        if SHAPES[shape]:
            assert await client.result(jid, timeout=10) == {"n": 7}
        else:
            with pytest.raises(ResultExpired):
                await client.result(jid, timeout=10)
        assert loop.time() - began < 5  # said at once, not at the timeout


@pytest.mark.parametrize("shape", SHAPES)
async def test_the_clusters_blocking_wait_reads_both_shapes(
    redis: Redis, keys: Keys, shape: str
) -> None:
    jid = await _write(redis, keys, shape, [1, 2])
    if SHAPES[shape]:
        assert await wait_blocking(redis, keys, jid, 5, chunk=0.5) == [1, 2]
    else:
        with pytest.raises(ResultExpired):
            await wait_blocking(redis, keys, jid, 5, chunk=0.5)


async def test_the_blocking_wait_hears_a_one_key_result_written_while_it_waits(
    redis: Redis, keys: Keys
) -> None:
    jid = uuid.uuid4().hex[:24]
    waiting = asyncio.create_task(wait_blocking(redis, keys, jid, 20, chunk=5))

    async def blocked() -> bool:
        return any(c.get("cmd") == "blmove" for c in await redis.client_list())

    await wait_for(blocked)  # the write below lands while it blocks
    key = keys.result(jid)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.rpush(key, results.encode_success("late", gone_for=60))
        pipe.expire(key, 120)
        await pipe.execute()
    assert await asyncio.wait_for(waiting, 10) == "late"


@pytest.mark.parametrize("shape", SHAPES)
async def test_the_lookup_reads_both_shapes(redis: Redis, keys: Keys, shape: str) -> None:
    jid = await _write(redis, keys, shape, "v")
    envelope, expired = await kept_result(redis, keys, jid)
    if SHAPES[shape]:
        assert envelope is not None
        assert envelope["value"] == "v"
        assert not expired
    else:
        assert (envelope, expired) == (None, True)


def test_expired_judges_only_a_one_key_envelope() -> None:
    one_key = results.encode_success("x", gone_for=10)
    assert results.expired(one_key, 10_000)
    assert results.expired(one_key, -2)  # gone between the two reads
    assert not results.expired(one_key, 10_001)
    assert not results.expired(one_key, -1)  # persisted by hand: kept
    # The two-key shape, or a value that only mentions the field, is kept while found.
    assert not results.expired(results.encode_success("x"), 0)
    assert not results.expired(results.encode_success({"gone_for": 1}), 0)
    assert not results.expired(b'not json "gone_for"', 0)
