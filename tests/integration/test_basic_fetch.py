"""Basic fetch (no in-progress list) never loses a job in normal running or on a graceful stop.

Jobs a basic worker holds ahead are in its memory only: given back (the shedder
returns jobs that sat unrun, a stop returns what is held or was cut off) they
are pushed back to the front of their queue, once, never dropped. Only a kill
-9 may lose what a basic worker held (documented).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.keys import Keys
from cogworker_async.worker import giveback
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

ran: Counter[int] = Counter()
started: Counter[int] = Counter()


@job(name="basic.step")
async def step(i: int, seconds: float) -> None:
    started[i] += 1
    if seconds:
        await asyncio.sleep(seconds)
    ran[i] += 1


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()
    started.clear()


@pytest.fixture
def give_backs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many jobs each give back call carried (the path under test must be taken)."""
    real = giveback.commands.give_back
    sizes: list[int] = []

    async def counted(*args: Any, **kwargs: Any) -> giveback.commands.GiveBackResult:
        result = await real(*args, **kwargs)
        sizes.append(len(kwargs["jobs"]))
        return result

    monkeypatch.setattr(giveback.commands, "give_back", counted)
    return sizes


async def _idle(redis: Redis, keys: Keys, worker: Worker) -> bool:
    """Nothing queued, held, or taken by a processor: what has not run never will."""
    assert worker.fetcher is not None
    assert worker.processors is not None
    return (
        await redis.llen(keys.queue("default")) == 0
        and not worker.fetcher.held
        and not worker.processors.claimed
    )


async def _ran_or_idle(redis: Redis, keys: Keys, worker: Worker, count: int) -> None:
    async def done() -> bool:
        if sum(ran.values()) >= count:
            return True
        if not await _idle(redis, keys, worker):
            return False
        await asyncio.sleep(0.5)  # idle twice, half a second apart: settled
        return await _idle(redis, keys, worker)

    await wait_for(done, timeout=90, interval=0.05)


async def test_jobs_held_ahead_and_given_back_all_run_once(
    settings: Settings, redis: Redis, keys: Keys, give_backs: list[int]
) -> None:
    """Quick jobs first (the worker fetches batches ahead), then slower ones: what it
    held ahead sat unrun and went back to the queue. Every job still runs, once."""
    basic = settings.model_copy(update={"fetch": "basic", "concurrency": 10})
    quick, slow = 1500, 300
    async with Client(basic) as client:
        await client.enqueue_many(step, [(i, 0) for i in range(quick)])
        await client.enqueue_many(step, [(quick + i, 0.02) for i in range(slow)])
    worker = Worker(basic, jobs=[step])
    async with worker:
        await _ran_or_idle(redis, keys, worker, quick + slow)
    assert give_backs, "nothing was given back: the test no longer exercises the path"
    missing = [i for i in range(quick + slow) if ran[i] == 0]
    assert not missing, f"{len(missing)} job(s) never ran, e.g. {missing[:5]}"
    assert max(ran.values()) == 1


async def test_a_graceful_stop_gives_back_what_was_held_and_what_was_cut_off(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    """Long jobs, some running (cut off by the stop's timeout), some held ahead, the
    rest queued: after the stop every one of them is on the queue, once, and the
    jobs fetched first are at its front (they run first)."""
    basic = settings.model_copy(
        update={
            "fetch": "basic",
            "concurrency": 4,
            "prefetch": 8,
            "shutdown_timeout": 0.5,
            # Held until the stop (they would go back within 100 ms by default).
            "give_back_held_after": 600.0,
        }
    )
    total = 30
    async with Client(basic) as client:
        await client.enqueue_many(step, [(i, 60) for i in range(total)])
    queued = await redis.lrange(keys.queue("default"), 0, -1)
    worker = Worker(basic, jobs=[step])
    async with worker:
        assert worker.fetcher is not None

        async def running_and_held() -> bool:
            assert worker.fetcher is not None
            return sum(started.values()) == 4 and len(worker.fetcher.held) == 8

        await wait_for(running_and_held, timeout=20)
    assert sum(ran.values()) == 0
    after = await redis.lrange(keys.queue("default"), 0, -1)
    assert sorted(after) == sorted(queued), (
        f"{len(after)} of {total} jobs on the queue after the stop"
    )
    # The queue is popped from its tail: the 12 fetched (4 run, 8 held) are there again.
    fetched_first = {orjson.loads(raw)["args"][0] for raw in after[-12:]}
    assert fetched_first == set(range(12))
    assert await redis.exists(keys.in_progress(worker.identity)) == 0
