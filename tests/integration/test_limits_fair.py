"""Fair across keys (``limits.fair``): jobs of many keys sharing a queue are
taken by turns, so a tenant with 10,000 jobs waiting does not starve one with
10; a weighted key gets its weight a turn; a worker killed with ``kill -9``
while it holds fair jobs loses none."""

from __future__ import annotations

import signal
from collections import Counter

import anyio
import pytest
import redis as sync_redis
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, api, job, limits
from cogworker_async.keys import Keys
from cogworker_async.store import commands
from tests.helpers import stop_processes, wait_for
from tests.integration.test_admin_cli import _ok
from tests.integration.test_cli import cli
from tests.integration.test_shutdown import runs, start_worker
from tests.jobs_for_tests import sleep_then_record

pytestmark = pytest.mark.anyio

done: list[str] = []
# How many of A's had ended when B's last one did.
a_done_at_b_end: list[int] = []
starts: list[str] = []


@job(name="fair.tenant", limits=[limits.fair(lambda tenant, i: tenant)])
async def tenant_job(tenant: str, i: int) -> None:
    done.append(tenant)
    if tenant == "b" and done.count("b") == 10:
        a_done_at_b_end.append(done.count("a"))


@job(
    name="fair.weighted",
    limits=[limits.fair(lambda tenant: tenant, weight=lambda tenant: 3 if tenant == "a" else 1)],
)
async def weighted_job(tenant: str) -> None:
    starts.append(tenant)


@pytest.fixture(autouse=True)
def _clear() -> None:
    done.clear()
    a_done_at_b_end.clear()
    starts.clear()


async def _waiting(redis: Redis, keys: Keys) -> int:
    """The jobs of queue default not taken yet: its list and its keys' lines."""
    total = int(await redis.llen(keys.queue("default")))
    for key in await redis.lrange(keys.fair_ring("default"), 0, -1):
        total += int(await redis.llen(keys.fair_jobs("default", key.decode())))
    return total


@pytest.mark.timeout(170)
async def test_ten_jobs_of_one_tenant_are_not_starved_by_ten_thousand_of_another(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(tenant_job, [("a", i) for i in range(10_000)])
        await client.enqueue_many(tenant_job, [("b", i) for i in range(10)])
        assert await redis.get(keys.fair_used) == b"1"  # said before the first was written
        async with Worker(settings, jobs=[tenant_job]):
            await wait_for(lambda: _true(done.count("b") == 10), timeout=120)
            # B's ten went in turns with A's: most of A's still wait.
            assert a_done_at_b_end[0] < 2_000
            assert await _waiting(redis, keys) > 5_000
            await wait_for(lambda: _true(len(done) == 10_010), timeout=150)
    assert Counter(done) == {"a": 10_000, "b": 10}
    assert await _waiting(redis, keys) == 0
    assert not await redis.exists(keys.fair_ring("default"), keys.fair_base("default") + ":a")


@pytest.mark.timeout(120)
async def test_a_weight_three_key_is_taken_three_to_one(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(weighted_job, [("a",)] * 400)
        await client.enqueue_many(weighted_job, [("b",)] * 400)
        async with Worker(settings, jobs=[weighted_job]):
            await wait_for(lambda: _true(len(starts) >= 400), timeout=60)
            first = Counter(starts[:400])
            await wait_for(lambda: _true(len(starts) == 800), timeout=60)
    # 3:1 while both have jobs (a few turns' slack: jobs start in their own tasks).
    assert 2.5 <= first["a"] / first["b"] <= 3.5, first
    assert Counter(starts) == {"a": 400, "b": 400}


@pytest.mark.timeout(170)
async def test_a_worker_killed_holding_fair_jobs_loses_none(
    settings: Settings, redis: Redis, keys: Keys, sync_client: sync_redis.Redis
) -> None:
    """Really SIGKILLed with fair jobs running and more on their keys' lines;
    a live worker recovers the running ones and runs every job."""
    jids: list[str] = []
    async with Client(settings) as client:
        for tenant in ("a", "b", "c"):
            fair = sleep_then_record.options(limits=[limits.fair(tenant)])
            for _ in range(8):
                handle = await client.enqueue(fair, 1.0)
                assert handle is not None
                jids.append(handle.jid)
    dying = start_worker(settings.model_copy(update={"concurrency": 4}))
    try:

        async def four_started() -> bool:
            return len(runs(sync_client, keys)) >= 4

        await wait_for(four_started, timeout=60)
        dying.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(dying.wait, 20)
    finally:
        if dying.poll() is None:
            dying.kill()
    killed = [r.split(":")[0] for r in runs(sync_client, keys)]
    assert await _waiting(redis, keys) > 0  # lines were still waiting
    live = start_worker(settings)
    try:

        async def all_done() -> bool:
            ended = {r.split(":")[0] for r in runs(sync_client, keys) if r.endswith(":done")}
            return ended >= set(jids)

        await wait_for(all_done, timeout=120)
    finally:
        await anyio.to_thread.run_sync(stop_processes, [live])
    assert await _waiting(redis, keys) == 0
    started = Counter(r.split(":")[0] for r in runs(sync_client, keys) if r.endswith(":start"))
    assert set(started) == set(jids)
    assert all(started[jid] >= 2 for jid in killed)  # ran again after the kill


async def _true(value: bool) -> bool:
    return value


async def test_fair_jobs_count_in_queue_sizes_are_listed_and_cleared(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(tenant_job, [("a", i) for i in range(30)])
        await client.enqueue_many(tenant_job, [("b", i) for i in range(5)])
    got = await commands.fetch(
        redis, keys, identity="host:1:me", queues=["default"], want=2, acks=[], reliable=True
    )
    assert len(got.jobs) == 2  # a's and b's first: 33 wait, one of them fed onto the list
    [queue] = await api.queues(redis, keys)
    assert queue.size == 33
    lines = await api.list_fair(redis, keys)
    assert {(line.queue, line.key, line.weight) for line in lines} == {
        ("default", "a", 1),
        ("default", "b", 1),
    }
    assert sum(line.waiting for line in lines) == 32
    listed = await anyio.to_thread.run_sync(lambda: _ok(cli(settings, "limits", "list")))
    assert "fair default\ta\twaiting 28\tweight 1" in listed
    assert "fair default\tb\twaiting 4\tweight 1" in listed
    assert await api.clear_queue(redis, keys, "default") == 33
    assert (await api.queues(redis, keys))[0].size == 0
    assert await api.list_fair(redis, keys) == []
