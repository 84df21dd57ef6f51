"""The running lock through a real worker (in process): a run that fails for good
(retry=False, or its last retry) releases it, so the next slot runs; a run that
fails with retries left keeps it, so slots are skipped while the retry waits; each
outcome is the entry's last result."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Worker, current_job, job
from cogworker_async.keys import Keys
from cogworker_async.periodic import every
from cogworker_async.settings import Settings
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

RUNS: list[tuple[str, float]] = []


@job(name="plock.fails_for_good", retry=False)
async def fails_for_good() -> None:
    RUNS.append(("for_good", float(current_job().payload["periodic_slot"])))
    raise RuntimeError("boom")


@job(name="plock.fails_with_retries", retry=5)
async def fails_with_retries() -> None:
    RUNS.append(("retries", float(current_job().payload["periodic_slot"])))
    raise RuntimeError("boom")


async def result_of(redis: Redis, keys: Keys, name: str) -> dict[str, Any] | None:
    raw = await redis.hget(keys.periodic("results"), name)  # type: ignore[misc]
    return None if raw is None else orjson.loads(raw)  # type: ignore[no-any-return]


async def test_terminal_failure_releases_the_lock_and_a_retry_keeps_it(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    RUNS.clear()
    entries = [
        every(1, fails_for_good, name="for_good", overlap=False),
        every(1, fails_with_retries, name="retries", overlap=False),
    ]
    worker = Worker(settings, jobs=[fails_for_good, fails_with_retries], periodic=entries)
    async with worker:

        async def three_terminal_runs() -> bool:
            return len({s for n, s in RUNS if n == "for_good"}) >= 3

        await wait_for(three_terminal_runs, timeout=20)
    # Released after each discard: a new slot ran each time.
    assert len({s for n, s in RUNS if n == "for_good"}) >= 3
    assert await redis.get(keys.periodic_running("for_good")) is None
    assert (await result_of(redis, keys, "for_good") or {})["result"] == "failed, discarded"
    # The failed run waits for its retry (at least 15 s off) holding the lock:
    # one run only, every later slot skipped.
    assert len([1 for n, _ in RUNS if n == "retries"]) == 1
    (slot,) = [s for n, s in RUNS if n == "retries"]
    retry = await redis.zrange(keys.retry, 0, -1)
    (waiting,) = [orjson.loads(r) for r in retry if b"retries" in r]
    assert await redis.get(keys.periodic_running("retries")) == waiting["jid"].encode()
    assert await redis.pttl(keys.periodic_running("retries")) > 3_600_000  # delay + queued TTL
    assert waiting["periodic_slot"] == slot
    assert (await result_of(redis, keys, "retries") or {})["result"] == "failed, will retry"
