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
import redis as sync_redis

from cogworker_async import Client, Settings, Worker, current_job, job
from cogworker_async.store.connection import connect, connect_sync
from tests.conftest import FAST
from tests.helpers import wait_for
from tests.servers import HOST, Sentinels

# No filter for unclosed sockets: closing a sentinel client also closes its
# links to the sentinels (connection.py), and a leak fails the test that made it.
pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

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


def _discovery_links(port: int) -> int:
    """How many clients of the sentinel on ``port`` last asked it for the primaries."""
    with sync_redis.Redis(host=HOST, port=port, decode_responses=True) as client:
        return sum(1 for c in client.client_list() if c["cmd"].startswith("sentinel"))


async def test_closing_a_client_closes_its_links_to_the_sentinels(sentinels: Sentinels) -> None:
    """redis-py's ``Sentinel`` keeps a client per sentinel for discovery that
    ``master_for``'s client does not own (redis-py #3201): ours closes them."""
    settings = Settings(redis_url=sentinels.url, namespace="lk", **FAST)
    redis = connect(settings)
    sync = connect_sync(settings, socket_timeout=5.0, socket_connect_timeout=5.0)
    try:
        assert await redis.ping()
        assert sync.ping()
        # Both asked a sentinel where the primary is, over links kept open.
        assert sum(_discovery_links(port) for port in sentinels.ports) >= 2
    finally:
        await redis.aclose()
        sync.close()

    async def all_closed() -> bool:
        return sum(_discovery_links(port) for port in sentinels.ports) == 0

    await wait_for(all_closed, timeout=10)


async def test_primary_killed_mid_run_every_job_completes(
    sentinels: Sentinels, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "cogworker_async")
    done.clear()
    try:
        await _run(sentinels, caplog)
    finally:
        gc.collect()  # an unclosed link would be reported now, failing this test


async def _enqueue_replicated(settings: Settings, numbers: range) -> list[str]:
    async with Client(settings) as producer:
        jids = await producer.enqueue_many(work, [(i,) for i in numbers])
    # Every enqueue on the replica before the kill: an enqueue acknowledged by the
    # primary alone may be lost by a failover (docs/scaling.md); these tests are
    # about the worker's side.
    redis = connect(settings)
    try:
        assert await redis.execute_command("WAIT", 1, 10_000) == 1
    finally:
        await redis.aclose()
    return jids


def _report(caplog: pytest.LogCaptureFixture, since: float) -> None:
    """The failover as the worker saw it; each duty's outage logged once, not per try."""
    for record in caplog.records:
        at = record.created - time.time() + time.monotonic() - since
        print(f"{at:6.2f} s", record.getMessage())
    outages = [r for r in caplog.records if "Redis unavailable" in r.getMessage()]
    per_duty = Counter(r.getMessage().split(":")[0] for r in outages)
    assert all(n == 1 for n in per_duty.values()), per_duty


async def _run(sentinels: Sentinels, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(
        redis_url=sentinels.url, namespace="fo", **{**FAST, "concurrency": 4, "prefetch": 0}
    )
    total = 800
    jids = await _enqueue_replicated(settings, range(total))
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
    _report(caplog, killed_at)


def _role(port: int) -> tuple[str, int | None]:
    """A server's role and, for a replica, its primary's port."""
    with sync_redis.Redis(host=HOST, port=port, decode_responses=True) as client:
        info = client.info("replication")
    return info["role"], info.get("master_port")


async def test_old_primary_back_as_a_replica_worker_stays_on_the_new_one(
    sentinels: Sentinels, caplog: pytest.LogCaptureFixture
) -> None:
    """The killed primary restarts on its address (empty, claiming to be a primary)
    and the sentinels turn it into a replica of the promoted one: the worker
    never goes back to it, jobs enqueued after its return complete too, and the
    outage is logged once per duty."""
    caplog.set_level(logging.WARNING, "cogworker_async")
    done.clear()
    settings = Settings(
        redis_url=sentinels.url, namespace="ob", **{**FAST, "concurrency": 4, "prefetch": 0}
    )
    old = sentinels.primary
    assert old.port is not None
    before = await _enqueue_replicated(settings, range(300))
    try:
        async with Worker(settings, jobs=[work]):

            async def started() -> bool:
                return len(done) >= 30

            await wait_for(started, timeout=30)
            killed_at = time.monotonic()
            old.kill()

            async def promoted() -> bool:
                return sentinels.primary_port() != old.port

            await wait_for(promoted, timeout=30)
            new_port = sentinels.primary_port()
            old.start()  # same address, no data: a primary until the sentinels see it

            async def demoted() -> bool:
                return _role(old.port) == ("slave", new_port)  # type: ignore[arg-type]

            await wait_for(demoted, timeout=30)
            after = await _enqueue_replicated(settings, range(300, 400))

            async def finished() -> bool:
                return set(done) >= {*before, *after}

            await wait_for(finished, timeout=60)
            took = time.monotonic() - killed_at
    finally:
        gc.collect()  # an unclosed link would be reported now, failing this test
    assert sentinels.primary_port() == new_port
    twice = {jid: n for jid, n in Counter(done).items() if n > 1}
    print(f"\nold primary back: all 400 jobs done {took:.1f} s after the kill; twice: {len(twice)}")
    assert len(twice) <= settings.concurrency + 1, twice
    _report(caplog, killed_at)
