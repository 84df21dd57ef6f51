"""Sentinel failover mid-run: a primary, a replica and three sentinels started here;
the primary is SIGKILLed while a worker runs, and every job still completes.

Duplicates are possible only among the jobs in flight at the kill (a job whose
ack was written to the old primary but not replicated runs again): they are
counted, reported, and bounded by what one process holds.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from cogworker_async import Client, Settings, Worker, current_job, job
from cogworker_async.store.connection import connect
from tests.conftest import FAST
from tests.helpers import wait_for
from tests.servers import Sentinels

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.chaos,
    # redis-py's asyncio Sentinel leaves a few links to the sentinels unclosed after
    # a failover (opened by discover_master), even once every client is closed:
    # reported by the garbage collector at exit, not ours to fix here.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

done: list[str] = []


@job(name="sn.work")
async def work(n: int) -> None:
    await asyncio.sleep(0.01)
    done.append(current_job().jid)


@pytest.fixture
def sentinels() -> Iterator[Sentinels]:
    servers = Sentinels()
    yield servers
    servers.stop()


async def test_primary_killed_mid_run_every_job_completes(
    sentinels: Sentinels, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "cogworker_async")
    done.clear()
    try:
        await _run(sentinels, caplog)
    finally:
        gc.collect()  # the unclosed sentinel links are reported here, under this test's filter


async def _run(sentinels: Sentinels, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(
        redis_url=sentinels.url, namespace="fo", **{**FAST, "concurrency": 4, "prefetch": 0}
    )
    total = 800
    async with Client(settings) as producer:
        jids = await producer.enqueue_many(work, [(i,) for i in range(total)])
    # Every enqueue on the replica before the kill: an enqueue acknowledged by the
    # primary alone may be lost by a failover (docs/scaling.md); this test is about
    # the worker's side.
    redis = connect(settings)
    try:
        assert await redis.execute_command("WAIT", 1, 10_000) == 1
    finally:
        await redis.aclose()
    old_port = sentinels.primary.port
    async with Worker(settings, jobs=[work]):

        async def started() -> bool:
            return len(done) >= 50

        await wait_for(started, timeout=30)
        killed_at = time.monotonic()
        sentinels.primary.kill()

        async def finished() -> bool:
            return set(done) >= set(jids)

        await wait_for(finished, timeout=90)
        took = time.monotonic() - killed_at
    assert sentinels.primary_port() != old_port  # the replica was promoted
    twice = {jid: n for jid, n in Counter(done).items() if n > 1}
    print(f"\nfailover: all {total} jobs done {took:.1f} s after the kill; ran twice: {len(twice)}")
    # Only jobs in flight at the kill can run again: at most what one process holds.
    assert len(twice) <= settings.concurrency + 1, twice
    for record in caplog.records:  # the failover as the worker saw it, for the report
        since = record.created - time.time() + time.monotonic() - killed_at
        print(f"{since:6.2f} s", record.getMessage())
    outages = [r for r in caplog.records if "Redis unavailable" in r.getMessage()]
    # Logged once per duty, not once per try.
    per_duty = Counter(r.getMessage().split(":")[0] for r in outages)
    assert all(n == 1 for n in per_duty.values()), per_duty
