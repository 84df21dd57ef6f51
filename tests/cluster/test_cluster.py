"""A worker on a real 3-primary Redis Cluster, its namespace hash-tagged into one slot."""

from __future__ import annotations

import asyncio

import pytest

from cogworker_async import Client, ResultNotKept, Settings, Worker, job
from cogworker_async.keys import Keys
from cogworker_async.store.connection import connect
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

ran: list[int] = []
failures: dict[int, int] = {}


@job(name="cl.add")
async def add(n: int) -> None:
    ran.append(n)


@job(name="cl.flaky", retry=3)
async def flaky(n: int) -> None:
    failures[n] = failures.get(n, 0) + 1
    if failures[n] < 2:
        raise RuntimeError("once")
    ran.append(n)


@job(name="cl.keeps", keep_result=60)
async def keeps(n: int) -> int:
    return n * 2


ALL = [add, flaky, keeps]


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()
    failures.clear()


def _ran(count: int):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return len(ran) >= count

    return check


async def test_jobs_run_end_to_end(settings: Settings) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(add, [(i,) for i in range(300)])
        for i in range(300, 310):
            await client.enqueue(add, i)
    async with Worker(settings, jobs=ALL):
        await wait_for(_ran(310), timeout=30)
    assert sorted(ran) == list(range(310))
    redis = connect(settings)
    try:
        keys = Keys(settings.namespace)
        assert int(await redis.get(keys.stats_processed)) == 310
    finally:
        await redis.aclose()


async def test_scheduled_and_retried_jobs(settings: Settings) -> None:
    async with Client(settings) as client:
        await client.enqueue(add.options(delay=0.5), 1)
        await client.enqueue(flaky, 2)
    async with Worker(settings, jobs=ALL):
        await wait_for(_ran(2), timeout=60)
    assert sorted(ran) == [1, 2]
    assert failures[2] == 2


async def test_several_queues(settings: Settings) -> None:
    settings = settings.model_copy(update={"queues": ("a", "b:2")})
    async with Client(settings) as client:
        for i in range(20):
            await client.enqueue(add.options(queue="a" if i % 2 else "b"), i)
    async with Worker(settings, jobs=ALL):
        await wait_for(_ran(20), timeout=30)
    await asyncio.sleep(0)
    assert sorted(ran) == list(range(20))


async def test_a_result_wait_says_when_none_will_come(settings: Settings) -> None:
    # A cluster's waiters block in BLMOVE (no pub/sub): their first look reads the status too.
    async with Client(settings) as client:
        kept = await client.enqueue(keeps, 4)
        plain = await client.enqueue(add.options(status=True), 9)
        assert kept is not None
        assert plain is not None
        early = await client.enqueue(add.options(status=True), 10)
        assert early is not None
        with pytest.raises(ResultNotKept, match="keeps no result"):
            await plain.result()
        # A bare jid's wait begun before its job ran: a look after each blocking read.
        waiting = asyncio.create_task(client.result(str(early), timeout=60))
        async with Worker(settings, jobs=ALL):
            assert await kept.result(timeout=30) == 8
            with pytest.raises(ResultNotKept, match="finished \\(complete\\)"):
                await asyncio.wait_for(waiting, timeout=30)

            async def finished() -> bool:
                status = await client.status(plain.jid)
                return status is not None and status.state == "complete"

            await wait_for(finished, timeout=30)
        with pytest.raises(ResultNotKept, match="finished \\(complete\\)"):
            await client.result(str(plain), timeout=30)
