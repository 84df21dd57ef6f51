"""``Client.abort`` reaches a failure a stopping worker handed over (``<ns>:unsettled``).

Handed over by the worker's own shutdown step (``Settler.hand_over_pending``),
then aborted: answered ``removed``, status and result say aborted, and the
live worker that files the unsettled list later has nothing to run. Aborted
("cancelling") while it ran and handed over after: the live worker files it as
aborted, never into retry.
"""

from __future__ import annotations

import logging
import random
import time

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import AbortOutcome, Client, JobAborted, Settings, Worker, job
from cogworker_async.keys import Keys
from cogworker_async.store.commands import Filing
from cogworker_async.worker.settlement import Settler
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

STOPPING = "stopping:1:unsettled"  # the process that hands its failure over
ran: list[str] = []


@job(name="au.record", status=True, keep_result=60, retry=3)
async def record(tag: str) -> str:
    ran.append(tag)
    return tag


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


async def _fetched_by_stopping(redis: Redis, keys: Keys) -> bytes:
    """The queued job, fetched by STOPPING (reliable fetch: on its in-progress list)."""
    raw = await redis.lmove(keys.queue("default"), keys.in_progress(STOPPING), "RIGHT", "LEFT")
    assert isinstance(raw, bytes)
    await redis.sadd(keys.in_progress_identities, STOPPING)
    return raw


async def _handed_over(settings: Settings, redis: Redis, keys: Keys, raw: bytes) -> None:
    """The job failed; Redis refused the filing and STOPPING, stopping, hands the
    failure (due for retry at once) over to the unsettled list."""
    job = orjson.loads(raw)
    entry = orjson.dumps({**job, "retry_count": 0, "error_class": "ValueError"})
    settler = Settler(
        redis,
        keys,
        settings,
        identity=STOPPING,
        logger=logging.getLogger("test"),
        rng=random.Random(1),
    )
    settler.pending[raw] = Filing(raw, job["jid"], keys.retry, time.time(), entry)
    assert await settler.hand_over_pending() == ([], [])
    assert await redis.llen(keys.in_progress(STOPPING)) == 0
    assert await redis.llen(keys.unsettled) == 1


async def _unsettled_empty(redis: Redis, keys: Keys) -> bool:
    return int(await redis.llen(keys.unsettled)) == 0


async def _state(client: Client, jid: str) -> str | None:
    found = await client.status(jid)
    return None if found is None else found.state


async def test_an_unsettled_job_is_removed_and_never_runs(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        victim = await client.enqueue(record, "victim")
        assert victim is not None
        await _handed_over(settings, redis, keys, await _fetched_by_stopping(redis, keys))

        assert await victim.abort() is AbortOutcome.REMOVED
        assert await _unsettled_empty(redis, keys)
        assert await _state(client, victim.jid) == "aborted"
        with pytest.raises(JobAborted):
            await victim.result(timeout=5)
        assert int(await redis.get(keys.stat("aborted")) or 0) == 1

        async with Worker(settings, jobs=[record]):
            after = await client.enqueue(record, "after")
            assert after is not None
            assert await after.result(timeout=10) == "after"
        assert ran == ["after"]
        assert await redis.zcard(keys.retry) == 0
        assert await victim.abort() is AbortOutcome.FINISHED


async def test_a_job_aborted_while_it_ran_then_handed_over_is_filed_as_aborted(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        victim = await client.enqueue(record, "victim")
        assert victim is not None
        raw = await _fetched_by_stopping(redis, keys)
        # Its process is not listening (it is stopping): the tombstone carries it.
        assert await victim.abort() is AbortOutcome.CANCELLING
        await _handed_over(settings, redis, keys, raw)

        async with Worker(settings, jobs=[record]):
            await wait_for(lambda: _unsettled_empty(redis, keys), timeout=15)
            after = await client.enqueue(record, "after")
            assert after is not None
            assert await after.result(timeout=10) == "after"
        assert ran == ["after"]
        assert await redis.zcard(keys.retry) == 0
        assert await _state(client, victim.jid) == "aborted"
        with pytest.raises(JobAborted):
            await victim.result(timeout=5)
        assert int(await redis.get(keys.stat("aborted")) or 0) == 1
