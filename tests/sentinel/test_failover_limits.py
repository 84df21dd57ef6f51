"""Limits across a Sentinel failover (issue 23 point 5): limited jobs run while the
primary is SIGKILLed and its replica promoted. Every job completes, no key ever
has more jobs running than its limit, and once all is done every key's slot set
(``<ns>:limits:<key>``) and held list is empty: no slot leaked.

A slot is taken and released in the same atomic step as the job's take and its
settlement, and a step replicates whole (effects replication), so the promoted
replica has either both the take and the slot or neither; a job whose ack was
lost with the old primary is reconciled and run again, releasing its slot then.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from cogworker_async import Client, Settings, Worker, current_job, job, limits
from cogworker_async.keys import Keys
from cogworker_async.store.connection import connect
from tests.conftest import FAST
from tests.helpers import wait_for
from tests.servers import Sentinels

pytestmark = [pytest.mark.anyio, pytest.mark.chaos]

KEYS = 3
LIMIT = 2
done: list[str] = []
running: Counter[str] = Counter()
peak: Counter[str] = Counter()


def key_of(n: int) -> str:
    return f"fk{n % KEYS}"


@job(name="sn.limited", limits=[limits.concurrency(key_of, LIMIT)])
async def limited(n: int) -> None:
    key = key_of(n)
    running[key] += 1
    peak[key] = max(peak[key], running[key])
    try:
        await asyncio.sleep(0.02)
    finally:
        running[key] -= 1
    done.append(current_job().jid)


@pytest.fixture
def sentinels() -> Iterator[Sentinels]:
    servers = Sentinels()
    yield servers
    servers.stop()


async def test_no_slot_leaks_and_no_key_runs_over_its_limit_across_a_failover(
    sentinels: Sentinels,
) -> None:
    done.clear()
    running.clear()
    peak.clear()
    # More processors than the keys' slots together (3 x 2): the limits hold jobs.
    settings = Settings(
        redis_url=sentinels.url, namespace="fl", **{**FAST, "concurrency": 10, "prefetch": 0}
    )
    total = 600
    jids = await _enqueue_limited(settings, total)
    old_port = sentinels.primary.port
    async with Worker(settings, jobs=[limited]):

        async def started() -> bool:
            return len(done) >= 60

        await wait_for(started, timeout=30)
        killed_at = time.monotonic()
        sentinels.primary.kill()

        async def finished() -> bool:
            return set(done) >= set(jids)

        await wait_for(finished, timeout=120)
        took = time.monotonic() - killed_at
        redis = connect(settings)
        keys = Keys(settings.namespace)
        try:

            async def nothing_held() -> bool:
                for i in range(KEYS):
                    if await redis.scard(keys.limit_slots(f"fk{i}")):
                        return False
                    if await redis.llen(keys.limit_parked(f"fk{i}")):
                        return False
                return True

            # The last acks settle (and a rerun's slot goes) after the last job ran.
            await wait_for(nothing_held, timeout=60)
        finally:
            await redis.aclose()
    assert sentinels.primary_port() != old_port  # the replica was promoted
    twice = sum(1 for n in Counter(done).values() if n > 1)
    print(
        f"\nfailover with limits: all {total} jobs done {took:.1f} s after the kill; "
        f"ran twice: {twice}; peak running per key: {dict(peak)} (limit {LIMIT})"
    )
    assert all(n <= LIMIT for n in peak.values()), peak
    assert set(peak) == {f"fk{i}" for i in range(KEYS)}


async def _enqueue_limited(settings: Settings, total: int) -> list[str]:
    """Every enqueue on the replica before the kill (as test_failover's): this test
    is about the worker's side, not an enqueue a failover lost."""
    async with Client(settings) as producer:
        jids = await producer.enqueue_many(limited, [(i,) for i in range(total)])
    redis = connect(settings)
    try:
        assert await redis.execute_command("WAIT", 1, 10_000) == 1
    finally:
        await redis.aclose()
    return jids
