"""Periodic entries for subprocess workers (tests/integration/test_periodic.py).

``cogworker-async worker tests.periodic_entries --periodic tests.periodic_entries:ENTRIES``.
The entry's period and misfire policy come from the environment
(TEST_PERIODIC_EVERY, TEST_PERIODIC_MISFIRE), so a test can restart the
workers with a changed definition. Each run counts itself per slot in the hash
``<ns>:test:periodic_runs`` (field ``<every>:<slot>``), and its start and end
in the list ``<ns>:test:periodic_runs:spans`` ("start <slot> <jid>", "end <slot>",
in the order they happened). TEST_PERIODIC_OVERLAP=0 makes the entry
overlap=False, TEST_PERIODIC_SLEEP the run's length.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from redis.asyncio import Redis

from cogworker_async import current_job, job
from cogworker_async.periodic import every

_client: dict[str, Redis] = {}


def runs_key() -> str:
    return f"{os.environ['COGWORKER_NAMESPACE']}:test:periodic_runs"


@job(name="periodic.record")
async def record(label: str) -> None:
    if "c" not in _client:
        _client["c"] = Redis.from_url(os.environ["COGWORKER_REDIS_URL"])
    payload = current_job().payload
    slot: Any = payload["periodic_slot"]
    client = _client["c"]
    await client.rpush(f"{runs_key()}:spans", f"start {float(slot):.0f} {payload['jid']}")
    sleep = float(os.environ.get("TEST_PERIODIC_SLEEP", "0"))
    if sleep:
        # Overlap check: how many runs are inside this block at once (at most 1).
        inside = await client.incr(f"{runs_key()}:inside")
        await client.rpush(f"{runs_key()}:peaks", inside)
        await asyncio.sleep(sleep)
        await client.decr(f"{runs_key()}:inside")
    await client.hincrby(runs_key(), f"{label}:{float(slot):.0f}", 1)
    await client.rpush(f"{runs_key()}:spans", f"end {float(slot):.0f}")


_every = float(os.environ.get("TEST_PERIODIC_EVERY", "1"))
ENTRIES = [
    every(
        _every,
        record,
        args=[f"{_every:g}"],
        name="tick",
        misfire=os.environ.get("TEST_PERIODIC_MISFIRE", "skip"),  # type: ignore[arg-type]
        overlap=os.environ.get("TEST_PERIODIC_OVERLAP", "1") == "1",
    )
]
