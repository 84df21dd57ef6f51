"""A job that ends without its processor still tells the truth (issue 21, item 5).

Deleted by an operator (from the schedule, or a cleared queue), killed from
the retry set, or buried as ``ProcessDied`` after its process was SIGKILLed:
before, its result waiters waited out their timeout and its status stayed
``queued``/``retrying``/``working``. Now each waiter gets ``JobFailed`` naming
how it ended, and its status says ``failed`` or ``dead``.
"""

from __future__ import annotations

import asyncio
import signal
import time

import anyio
import pytest
import redis as sync_redis
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, api, job
from cogworker_async.errors import JobFailed, ResultNotKept
from cogworker_async.keys import Keys
from cogworker_async.store import admin
from tests.helpers import wait_for
from tests.integration.test_shutdown import runs, start_worker
from tests.jobs_for_tests import suicide

pytestmark = pytest.mark.anyio


@job(name="endings.later", keep_result=60, status=True)
async def later() -> int:
    return 1


@job(name="endings.flaky", keep_result=60, status=True, retry=5, retry_in=lambda c, e, j: 600)
async def flaky() -> None:
    raise RuntimeError("try again in 10 minutes")


async def _status_of(client: Client, jid: str) -> tuple[str | None, str | None]:
    found = await client.status(jid)
    return (None, None) if found is None else (found.state, found.error_class)


async def test_a_waiter_hears_a_deleted_scheduled_job(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(later.options(delay=600))
        assert handle is not None
        waiting = asyncio.create_task(handle.result(timeout=60))
        assert await api.delete(redis, keys, "schedule", [handle.jid]) == 1
        with anyio.fail_after(20), pytest.raises(JobFailed) as failed:
            await waiting
        assert failed.value.error_class == "JobDeleted"
        assert await _status_of(client, handle.jid) == ("failed", "JobDeleted")


async def test_a_waiter_hears_a_cleared_queue(settings: Settings, redis: Redis, keys: Keys) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(later)
        assert handle is not None
        waiting = asyncio.create_task(handle.result(timeout=60))
        assert await api.clear_queue(redis, keys, "default") == 1
        with anyio.fail_after(20), pytest.raises(JobFailed) as failed:
            await waiting
        assert failed.value.error_class == "JobDeleted"
        assert await _status_of(client, handle.jid) == ("failed", "JobDeleted")


async def test_a_waiter_hears_a_job_killed_from_the_retry_set(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(flaky)
        assert handle is not None
        waiting = asyncio.create_task(handle.result(timeout=60))
        async with Worker(settings, jobs=[later, flaky]):

            async def retrying() -> bool:
                return await _status_of(client, handle.jid) == ("retrying", "RuntimeError")

            await wait_for(retrying, timeout=20)
        [entry] = await redis.zrange(keys.retry, 0, -1)
        assert not waiting.done()
        # What the web UI's "kill" does.
        assert await admin.kill_entry(
            redis,
            keys,
            source=keys.retry,
            entry=entry,
            dead_entry=entry,
            now=time.time(),
            dead_max_jobs=settings.dead_max_jobs,
            dead_timeout=settings.dead_timeout,
        )
        with anyio.fail_after(20), pytest.raises(JobFailed) as failed:
            await waiting
        assert failed.value.error_class == "RuntimeError"  # the error its dead entry carries
        assert await _status_of(client, handle.jid) == ("dead", "RuntimeError")


@pytest.mark.timeout(150)
async def test_a_waiter_hears_a_job_buried_as_process_died(
    settings: Settings, redis: Redis, keys: Keys, sync_client: sync_redis.Redis
) -> None:
    """Really SIGKILLed (the job kills its own process), recovered by a live worker.

    Enqueued by the client as a user would, so its status hash says ``queued``
    before any worker starts: the job kills its process before its best-effort
    ``working`` write may land, and the burial updates a status that exists.
    """
    settings = settings.model_copy(update={"max_orphanings": 0})
    async with Client(settings) as client:
        handle = await client.enqueue(suicide.options(keep_result=60, status=True))
        assert handle is not None
        jid = handle.jid

        async def queued() -> bool:
            return await _status_of(client, jid) == ("queued", None)

        await wait_for(queued, timeout=20)
        waiting = asyncio.create_task(client.result(jid, timeout=140))
        workers = []
        try:
            with anyio.fail_after(130):
                while not waiting.done():
                    workers = [w for w in workers if w.poll() is None]
                    if len(workers) < 2:
                        workers.append(start_worker(settings))  # a swarm would replace it
                    await asyncio.wait([waiting], timeout=0.2)
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.send_signal(signal.SIGTERM)
            for worker in workers:
                await anyio.to_thread.run_sync(worker.wait, 15)
        with pytest.raises(JobFailed) as failed:
            await waiting
        assert failed.value.error_class == "ProcessDied"
        assert await _status_of(client, jid) == ("dead", "ProcessDied")
        assert runs(sync_client, keys) == [jid + ":start"]  # it ran once, and died


@job(name="endings.untracked_result", status=True)
async def keeps_no_result() -> int:
    return 1


async def test_a_bare_jid_waiter_hears_a_deleted_job_that_keeps_no_result(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    """The script that ends it publishes its finished status, so a wait begun
    before the delete ends at once with ``ResultNotKept``, not at its timeout."""
    async with Client(settings) as client:
        handle = await client.enqueue(keeps_no_result.options(delay=600))
        assert handle is not None

        async def scheduled() -> bool:
            return await _status_of(client, handle.jid) == ("scheduled", None)

        await wait_for(scheduled, timeout=20)
        waiting = asyncio.create_task(client.result(str(handle.jid), timeout=60))

        async def subscribed() -> bool:
            [(_, count)] = await redis.pubsub_numsub(keys.result_ready(handle.jid))
            return int(count) >= 1

        await wait_for(subscribed, timeout=20)  # the wait found it unfinished
        assert await api.delete(redis, keys, "schedule", [handle.jid]) == 1
        with anyio.fail_after(20), pytest.raises(ResultNotKept):
            await waiting
        assert await _status_of(client, handle.jid) == ("failed", "JobDeleted")
