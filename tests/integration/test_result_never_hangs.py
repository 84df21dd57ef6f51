"""A result wait that cannot end says so: ``result()`` never hangs silently.

A job that keeps no result: ``ResultNotKept`` at once, from its handle (it
knows the payload) and from a bare jid whose status says it finished,
whether the wait began before or after. No live process reading the job's
queue: a WARNING as the wait starts and a ``ResultTimeout`` naming it, and a
worker started after the wait began still delivers. A job that keeps its
result: nothing said, its value as before.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from redis.asyncio import Redis

from cogworker_async import Client, JobFunction, Settings, Worker, job
from cogworker_async.client.results import encode_success, store_result, wait_blocking
from cogworker_async.errors import ResultExpired, ResultNotKept, ResultTimeout
from cogworker_async.keys import Keys
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

CLIENT_LOG = "cogworker_async.client"


@job(name="hang.keeps", keep_result=60)
async def keeps(a: int) -> int:
    return a * 2


@job(name="hang.plain")
async def plain() -> int:
    return 7


@job(name="hang.elsewhere", queue="elsewhere", keep_result=60)
async def elsewhere() -> str:
    return "ran"


ALL: list[JobFunction[Any, Any]] = [keeps, plain, elsewhere]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == CLIENT_LOG and r.levelno == logging.WARNING
    ]


async def test_a_handle_of_a_job_that_keeps_nothing_raises_at_once(settings: Settings) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(plain)
        by_name = await client.enqueue("hang.plain")  # declared here: known too
        assert handle is not None
        assert by_name is not None
        assert handle.keeps_result is False
        assert by_name.keeps_result is False
        loop = asyncio.get_running_loop()
        began = loop.time()
        for waited in (handle, by_name):
            with pytest.raises(ResultNotKept) as not_kept:
                await waited.result()  # no timeout: would have waited for ever
            message = str(not_kept.value)
            assert f"job {waited.jid} keeps no result" in message
            assert "keep_result=" in message
            assert ".options(keep_result=" in message
            assert "keep_result setting" in message
            with pytest.raises(ResultNotKept):
                await client.result(waited, timeout=30)  # the handle given to the Client
        assert loop.time() - began < 2  # said at once, not after any timeout
        # What such a wait used to end in still catches it.
        assert isinstance(not_kept.value, ResultTimeout)


async def test_a_bare_jid_whose_status_says_finished_with_nothing_kept_raises(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        before = await client.enqueue(plain.options(status=True))
        after = await client.enqueue(plain.options(status=True))
        assert before is not None
        assert after is not None
        # Begun before the job runs: the finished status's publish ends it.
        early = asyncio.create_task(client.result(str(before), timeout=60))

        async def subscribed() -> bool:
            channels = await redis.pubsub_channels(keys.result_ready("*"))
            return keys.result_ready(before).encode() in channels

        await wait_for(subscribed)
        async with Worker(settings, jobs=ALL):
            with pytest.raises(ResultNotKept) as heard:
                await asyncio.wait_for(early, timeout=20)
            await wait_for(lambda: _state_is(client, str(after), "complete"))
        assert "finished (complete) and keeps no result" in str(heard.value)
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(ResultNotKept, match="finished \\(complete\\)"):
            await client.result(str(after), timeout=30)  # begun after: its first look
        assert loop.time() - began < 2


async def _state_is(client: Client, jid: str, state: str) -> bool:
    status = await client.status(jid)
    return status is not None and status.state == state


async def test_a_handle_that_keeps_its_result_finished_with_none_left_says_expired(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(keeps.options(status=True), 4)
        assert handle is not None
        assert handle.keeps_result is True
        async with Worker(settings, jobs=ALL):
            assert await handle.result(timeout=10) == 8
        # Past its keep_result and its "gone" marker too; the status still says complete.
        await redis.delete(keys.result(handle.jid), keys.result_gone(handle.jid))
        with pytest.raises(ResultExpired, match="finished \\(complete\\)"):
            await handle.result(timeout=30)


async def test_no_live_process_is_warned_of_and_named_by_the_timeout(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=CLIENT_LOG)
    async with Client(settings) as client:
        handle = await client.enqueue(keeps, 1)
        assert handle is not None
        with pytest.raises(ResultTimeout) as timed_out:
            await handle.result(timeout=0.5)
        assert type(timed_out.value) is ResultTimeout
        assert str(timed_out.value) == (
            f"no result for job {handle.jid} within 0.5 s: no live process is running:"
            " the job waits on queue 'default' until one reads it"
        )
        assert _warnings(caplog) == [
            f"waiting for the result of job {handle.jid}: no live process is running: the job"
            " waits on queue 'default' until one reads it; ResultTimeout in 0.5 s unless a"
            " worker starts (one that does delivers)"
        ]
        # A bare jid: its queue is not known here, so "none runs at all" is what is said.
        caplog.clear()
        with pytest.raises(ResultTimeout, match="no live process is running"):
            await client.result(str(handle), timeout=0.3)
        assert len(_warnings(caplog)) == 1


async def test_a_queue_no_live_process_reads_is_named(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=CLIENT_LOG)
    async with Worker(settings, jobs=ALL), Client(settings) as client:
        handle = await client.enqueue(elsewhere)
        assert handle is not None
        assert handle.queue == "elsewhere"
        with pytest.raises(ResultTimeout) as timed_out:
            await handle.result(timeout=0.5)
    said = "no live process reads queue 'elsewhere' (they read: default)"
    assert said in str(timed_out.value)
    [warning] = _warnings(caplog)
    assert said in warning


async def test_a_worker_started_after_the_wait_began_still_delivers(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=CLIENT_LOG)
    async with Client(settings) as client:
        handle = await client.enqueue(keeps, 21)
        assert handle is not None
        waiting = asyncio.create_task(handle.result())  # no timeout: it waits on

        async def warned() -> bool:
            return bool(_warnings(caplog))

        await wait_for(warned)
        [warning] = _warnings(caplog)
        assert "waiting with no timeout: a worker that starts later still delivers" in warning
        assert not waiting.done()
        async with Worker(settings, jobs=ALL):
            assert await asyncio.wait_for(waiting, timeout=20) == 42


async def test_a_job_that_keeps_its_result_is_untouched(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=CLIENT_LOG)
    async with Worker(settings, jobs=ALL), Client(settings) as client:
        handle = await client.enqueue(keeps, 5)
        by_options = await client.enqueue(plain.options(keep_result=30))
        assert handle is not None
        assert by_options is not None
        assert (handle.keeps_result, by_options.keeps_result) == (True, True)
        assert await handle.result(timeout=10) == 10
        assert await by_options.result() == 7
        assert await client.result(str(handle), timeout=10) == 10  # a bare jid too
    assert _warnings(caplog) == []


async def test_the_blocking_wait_of_a_cluster_reads_the_status_too(
    redis: Redis, keys: Keys
) -> None:
    # wait_blocking is the Redis Cluster's way; it runs on one server just the same.
    jid = "ab" * 12
    waiting = asyncio.create_task(wait_blocking(redis, keys, jid, 30, chunk=0.1))

    async def blocking() -> bool:  # its first look found nothing: it reads on
        return any(c.get("cmd") == "blmove" for c in await redis.client_list())

    await wait_for(blocking)
    await redis.hset(keys.status(jid), "state", "complete")
    with pytest.raises(ResultNotKept, match="finished \\(complete\\)"):
        await asyncio.wait_for(waiting, timeout=10)
    with pytest.raises(ResultExpired, match="finished \\(complete\\)"):
        await wait_blocking(redis, keys, jid, 30, chunk=0.1, keeps=True)
    await store_result(redis, keys, jid, encode_success(3), 60)
    assert await wait_blocking(redis, keys, jid, 30, chunk=0.1) == 3
    await redis.delete(keys.status(jid), keys.result(jid), keys.result_gone(jid))
    with pytest.raises(ResultTimeout, match=r"within 0\.2 s"):
        await wait_blocking(redis, keys, jid, 0.2, chunk=0.1)
