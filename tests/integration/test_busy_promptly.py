"""A job that starts is seen on Busy (``api.busy``) long before a whole heartbeat
interval has passed: its start asks the heartbeat for an early beat, and early
beats are spaced at least ``EARLY_BEAT_SPACING`` of an interval apart."""

from __future__ import annotations

import time

import anyio
import pytest

from cogworker_async import Client, Settings, Worker, api, job
from cogworker_async.keys import Keys
from cogworker_async.store.connection import connect
from cogworker_async.worker.heartbeat import EARLY_BEAT_SPACING
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

gates: dict[str, anyio.Event] = {}
INTERVAL = 15.0  # far longer than the test: only an early beat can show the job


@job(name="bp.held")
async def held(n: int) -> None:
    await gates["held"].wait()


async def test_a_started_job_is_on_busy_within_a_fraction_of_the_interval(
    settings: Settings, keys: Keys
) -> None:
    gates["held"] = anyio.Event()
    slow = settings.model_copy(
        update={"heartbeat_interval": INTERVAL, "heartbeat_ttl": 60.0, "orphan_threshold": 180.0}
    )
    redis = connect(slow)
    try:
        async with Client(slow) as client, Worker(slow, jobs=[held]):

            async def registered() -> bool:
                return any(p.alive for p in await api.processes(redis, keys))

            await wait_for(registered, timeout=30)
            first = await client.enqueue(held, 1)
            assert first is not None
            started = time.monotonic()

            async def shown(jid: str) -> bool:
                return jid in {b.jid for b in await api.busy(redis, keys)}

            await wait_for(lambda: shown(first.jid), timeout=INTERVAL * 0.6)
            # Well inside one interval even on a loaded machine.
            assert time.monotonic() - started < INTERVAL * 0.6
            # A second start, right after: its beat waits out the spacing, then comes.
            second = await client.enqueue(held, 2)
            assert second is not None
            await wait_for(lambda: shown(second.jid), timeout=INTERVAL * EARLY_BEAT_SPACING + 10)
            gates["held"].set()
    finally:
        await redis.aclose()
