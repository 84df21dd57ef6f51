"""A worker cut off from Redis (a real connection cut, through tests/faultproxy.py)
for ~10 s: with misfire="skip", the slots that came while it was away are not run
when the link comes back (the old ticker caught up the last 4 of each entry); the
schedule goes on from there."""

from __future__ import annotations

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async import Worker, current_job, job
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.periodic import every
from cogworker_async.settings import Settings
from tests.faultproxy import FaultProxy
from tests.helpers import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.anyio]

ran: list[float] = []


@job(name="outage.tick")
async def tick() -> None:
    ran.append(float(current_job().payload["periodic_slot"]))


async def redis_now(redis: Redis) -> float:
    seconds, micros = await redis.time()
    return int(seconds) + int(micros) / 1e6


@pytest.mark.timeout(120)
async def test_skip_runs_no_slot_missed_while_the_link_was_cut(
    redis_server: EmbeddedRedis, settings: Settings, redis: Redis
) -> None:
    ran.clear()
    # Every 2 s, 10 s cut: 5 slots missed, 2 of them well inside the cut (the
    # old ticker's catch-up of the last 4 would run them).
    entry = every(2, tick, name="every_2", misfire="skip")
    with FaultProxy("127.0.0.1", redis_server.port or 0) as proxy:
        cut_off = settings.model_copy(update={"redis_url": proxy.url})
        async with Worker(cut_off, jobs=[tick], periodic=[entry]):
            await wait_for(lambda: _ran(1), timeout=30)
            proxy.refuse(True)
            proxy.cut()
            cut_at = await redis_now(redis)
            # The outage itself is what is tested: nothing to await but time.
            await anyio.sleep(10)
            healed_at = await redis_now(redis)
            proxy.refuse(False)
            before = len(ran)
            await wait_for(lambda: _ran(before + 2), timeout=40)
    during = [s for s in ran if cut_at + 3 < s < healed_at - 3]
    assert during == [], (cut_at, healed_at, sorted(ran))
    # Every slot ran at most once, and the schedule went on after the outage.
    assert len(ran) == len(set(ran))
    assert max(ran) > healed_at


async def _ran(n: int) -> bool:
    return len(ran) >= n
