"""The metrics history through faults: an acknowledged job is always counted, once.

Counting happens in the script call that acknowledges the job, so whatever
the link or the server does, "acked" and "counted" can't come apart: a call
that never ran did neither (its acks are resent), a call whose reply was lost
did both (its resent acks find their jobs gone and take their runs back out).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, api, job
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from tests.conftest import FAST
from tests.faultproxy import FaultProxy
from tests.helpers import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.anyio]

done: list[int] = []


@job(name="chaos.counted")
async def counted(i: int) -> None:
    await asyncio.sleep(0.002)
    done.append(i)


@job(name="chaos.counted_fail", retry=False)
async def counted_fail(i: int) -> None:
    await asyncio.sleep(0.002)
    done.append(i)
    raise ValueError("counted as failed")


@pytest.fixture
def durable_redis() -> Iterator[EmbeddedRedis]:
    """A server that keeps its data across a restart (AOF, fsync always)."""
    server = EmbeddedRedis(extra_args=["--appendonly", "yes", "--appendfsync", "always"])
    server.start()
    yield server
    server.stop()


async def _done(n: int) -> bool:
    return len(set(done)) >= n


async def _logged(caplog: pytest.LogCaptureFixture, start: str) -> bool:
    return any(r.getMessage().startswith(start) for r in caplog.records)


async def _assert_counted_once(redis: Redis, keys: Keys, ok: int, failed: int) -> None:
    """Every job that ran is in the history exactly once, as it is in the stats."""
    processed = int(await redis.get(keys.stats_processed) or 0)
    assert processed == ok + failed
    assert int(await redis.get(keys.stats_failed) or 0) == failed
    history = await api.history(redis, keys, minutes=15, days=2)
    assert sum(m.processed for m in history.minutes) == processed
    assert sum(m.failed for m in history.minutes) == failed
    jobs = history.jobs()
    assert jobs["chaos.counted"].runs == ok
    assert sum(jobs["chaos.counted"].histogram) == ok
    assert jobs["chaos.counted"].failures == 0
    if failed:
        assert jobs["chaos.counted_fail"].runs == jobs["chaos.counted_fail"].failures == failed
    assert sum(d.processed for d in history.days) == processed


@pytest.mark.timeout(120)
async def test_redis_stopped_mid_run_loses_no_counted_job(
    durable_redis: EmbeddedRedis, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    done.clear()
    settings = Settings(
        redis_url=durable_redis.url,
        namespace=namespace,
        concurrency=20,
        metrics_history=True,
        **FAST,
    )
    keys = Keys(namespace)
    total, failing = 3000, 200
    async with Client(settings) as client:
        await client.enqueue_many(counted, [(i,) for i in range(total - failing)])
        await client.enqueue_many(counted_fail, [(i,) for i in range(total - failing, total)])
        async with Worker(settings, jobs=[counted, counted_fail]):
            await wait_for(lambda: _done(300), timeout=30)
            durable_redis.kill()
            # Down until the worker has seen it (acks and filings pile up meanwhile).
            await wait_for(lambda: _logged(caplog, "Fetch: Redis unavailable"), timeout=20)
            durable_redis.restart()
            await wait_for(lambda: _done(total), timeout=60)
        redis = Redis.from_url(durable_redis.url)
        try:
            await _assert_counted_once(redis, keys, total - failing, failing)
        finally:
            await redis.aclose()
    assert len(done) == total  # nothing ran twice


@pytest.mark.timeout(120)
async def test_links_cut_mid_run_count_every_acked_job_once(
    redis_server: EmbeddedRedis, settings: Settings, redis: Redis, keys: Keys
) -> None:
    """Cuts land while calls are out: some acks' replies are lost, and they are resent."""
    done.clear()
    total = 4000
    async with Client(settings) as client:
        await client.enqueue_many(counted, [(i,) for i in range(total)])
    with FaultProxy("127.0.0.1", redis_server.port or 0) as proxy:
        cut_off = settings.model_copy(
            update={"redis_url": proxy.url, "concurrency": 20, "metrics_history": True}
        )
        async with Worker(cut_off, jobs=[counted]):
            for step in range(1, 8):
                await wait_for(lambda s=step: _done(400 * s), timeout=30)
                proxy.cut()
            await wait_for(lambda: _done(total), timeout=60)
    await _assert_counted_once(redis, keys, total, 0)
    assert len(done) == total
