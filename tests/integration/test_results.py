"""Kept results: ``enqueue``'s handle, ``Client.result``, and what waiting for one says.

A result round trip for success (async and plain ``def``), a terminal failure
(dead and discarded) raising ``JobFailed`` with its class and message, a
timeout, a wait begun before the job is even fetched (a subscription, not a
poll), one begun after the result expired, and a non-JSON return value failing
the job at the handler.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, JobFunction, Settings, Worker, job
from cogworker_async.client import JobHandle
from cogworker_async.errors import JobFailed, ResultExpired, ResultTimeout
from cogworker_async.keys import Keys
from cogworker_async.store import results
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio


@job(name="res.add", keep_result=60)
async def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@job(name="res.mul", keep_result=60)
def mul(a: int, b: int) -> int:
    return a * b


@job(name="res.boom", keep_result=60, retry=0)
async def boom(tag: str) -> None:
    raise ValueError(f"boom {tag}")


@job(name="res.discarded", keep_result=60, retry=False)
async def discarded() -> None:
    raise KeyError("gone")


@job(name="res.short", keep_result=1)
async def short() -> str:
    return "soon gone"


@job(name="res.not_json", keep_result=60, retry=0)
async def not_json() -> object:
    return {1, 2}  # a set: not JSON


@job(name="res.plain")
async def plain() -> int:
    return 7


ALL: list[JobFunction[Any, Any]] = [add, mul, boom, discarded, short, not_json, plain]


async def test_a_result_round_trip_async_and_sync(settings: Settings) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(add, 2, 3)
        by_options = await client.enqueue(plain.options(keep_result=30))
        threaded = await client.enqueue(mul, 6, 7)
        assert isinstance(handle, JobHandle)
        assert isinstance(handle, str)
        assert handle == handle.jid
        assert len(handle.jid) == 24
        assert by_options is not None
        assert threaded is not None
        async with Worker(settings, jobs=ALL):
            assert await handle.result(timeout=10) == {"sum": 5}
            assert await by_options.result(timeout=10) == 7
            assert await client.result(threaded.jid, timeout=10) == 42
        # Read again later, by anyone: the result is not consumed by a waiter.
        assert await client.result(handle.jid, timeout=1) == {"sum": 5}


async def test_a_wait_begun_before_the_job_is_fetched_blocks_then_gets_it(
    settings: Settings, redis: Redis
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(add, 1, 1)
        assert handle is not None
        waiting = asyncio.create_task(handle.result(timeout=20))

        async def subscribed() -> bool:
            clients = await redis.client_list()
            return any(c.get("cmd") == "subscribe" for c in clients)

        await wait_for(subscribed)  # told by the job's channel, not a poll
        assert not waiting.done()
        async with Worker(settings, jobs=ALL):
            assert await waiting == {"sum": 2}


async def test_a_terminal_failure_raises_job_failed_with_its_class_and_message(
    settings: Settings,
) -> None:
    async with Client(settings) as client:
        dead = await client.enqueue(boom, "x")
        gone = await client.enqueue(discarded)
        assert dead is not None
        assert gone is not None
        async with Worker(settings, jobs=ALL):
            with pytest.raises(JobFailed) as failed:
                await dead.result(timeout=10)
            with pytest.raises(JobFailed) as failed_discarded:
                await gone.result(timeout=10)
    assert (failed.value.error_class, failed.value.error_message) == ("ValueError", "boom x")
    assert failed_discarded.value.error_class == "KeyError"


async def test_no_result_in_time_raises_result_timeout(settings: Settings) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(add, 1, 2)
        assert handle is not None
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(ResultTimeout):
            await handle.result(timeout=0.3)
        assert 0.25 <= loop.time() - began < 3


async def test_a_result_awaited_after_it_expired_says_so(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(short)
        assert handle is not None
        async with Worker(settings, jobs=ALL):
            assert await handle.result(timeout=10) == "soon gone"

        async def expired() -> bool:
            # Past its keeping: its list gone (two keys), or in its key's last
            # gone_for s (one key: store/results.py).
            key = keys.result(handle.jid)
            envelope = await redis.lindex(key, 0)
            return envelope is None or results.expired(envelope, await redis.pttl(key))

        await wait_for(expired, timeout=5)
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(ResultExpired):
            await handle.result(timeout=30)
        assert loop.time() - began < 5  # said at once, not after the timeout


async def test_a_return_value_that_is_not_json_fails_the_job_clearly(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(not_json)
        assert handle is not None
        async with Worker(settings, jobs=ALL):
            with pytest.raises(JobFailed) as failed:
                await handle.result(timeout=10)
    assert failed.value.error_class == "ResultNotJSON"
    assert "res.not_json returned set, which is not JSON" in failed.value.error_message
    entries: list[bytes] = await redis.zrange(keys.dead, 0, -1)  # type: ignore[assignment]
    [entry] = [orjson.loads(e) for e in entries]
    assert entry["jid"] == handle.jid
    assert entry["error_class"] == "ResultNotJSON"


async def test_a_plain_job_keeps_no_result_and_writes_no_status(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(plain)
        assert handle is not None
        assert b"keep_result" not in (await redis.lindex(keys.queue("default"), 0) or b"")
        async with Worker(settings, jobs=ALL):

            async def done() -> bool:
                return int(await redis.get(keys.stats_processed) or 0) == 1

            await wait_for(done)
        with pytest.raises(ResultTimeout):
            await handle.result(timeout=0.1)
    assert await redis.keys(f"{keys.ns}:result*") == []
    assert await redis.keys(f"{keys.ns}:status*") == []


async def test_enqueue_many_keeps_results_when_asked(settings: Settings) -> None:
    async with Client(settings) as client:
        jids = await client.enqueue_many(plain.options(keep_result=30), [(), ()])
        async with Worker(settings, jobs=ALL):
            assert [await client.result(j, timeout=10) for j in jids] == [7, 7]


async def test_the_handle_pickles_as_its_jid_and_bad_keep_result_is_refused(
    settings: Settings,
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(add, 1, 2)
    assert handle is not None
    assert pickle.loads(pickle.dumps(handle)) == handle.jid
    assert orjson.loads(orjson.dumps({"jid": handle})) == {"jid": handle.jid}
    with pytest.raises(ValueError, match="keep_result must be a finite number of seconds, above 0"):
        add.options(keep_result=-1)
    with pytest.raises(TypeError, match="keep_result must be a number"):
        job(keep_result=True)
