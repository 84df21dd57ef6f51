"""Delayed jobs and retries run on time, not at the scheduled poller's next interval (issue 12.4).

Every test uses a long ``scheduled_poll_interval`` (30 s): a poller that only
woke on its interval would run these jobs 15-45 s late.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.keys import Keys
from cogworker_async.worker import scheduler
from tests.helpers import wait_for
from tests.lua.support import make_job

pytestmark = pytest.mark.anyio

# Generous for a loaded 2-core machine; the benchmark measures the real figure
# (bench/delay_latency.py, p99 well under 50 ms on an idle machine).
LATE_AT_MOST = 0.3

runs: list[tuple[str, float]] = []  # (what, time.time() at start)
tries: dict[str, int] = {}


@job(name="delays.note")
async def note(what: str) -> None:
    runs.append((what, time.time()))


@job(name="delays.flaky", retry_in=lambda count, exc, job: 1.0)
async def flaky(what: str) -> None:
    tries[what] = tries.get(what, 0) + 1
    if tries[what] == 1:
        raise RuntimeError("first try fails")
    runs.append((what, time.time()))


@pytest.fixture
def slow_poll(settings: Settings) -> Settings:
    runs.clear()
    tries.clear()
    return settings.model_copy(update={"scheduled_poll_interval": 30.0})


async def _ran(count: int) -> bool:
    return len(runs) >= count


def _lateness(what: str, due: float) -> float:
    (started,) = [t for w, t in runs if w == what]
    return started - due


async def test_a_delayed_job_enqueued_while_the_worker_sleeps_runs_on_time(
    slow_poll: Settings,
) -> None:
    async with Worker(slow_poll, jobs=[note]) as worker, Client(slow_poll) as client:
        await worker.started.wait()
        due = time.time() + 1.5  # after the first poll (at most 1 s after the start)
        await client.enqueue(note.options(delay=1.5), "later")
        # One due sooner, enqueued after it: the marker wakes the poller again.
        due_sooner = time.time() + 0.5
        await client.enqueue(note.options(delay=0.5), "sooner")
        await wait_for(lambda: _ran(2), timeout=10)
    assert [w for w, _ in runs] == ["sooner", "later"]
    assert 0 <= _lateness("sooner", due_sooner) < LATE_AT_MOST
    assert 0 <= _lateness("later", due) < LATE_AT_MOST


async def test_entries_already_scheduled_at_start_run_on_time(
    slow_poll: Settings, redis: Redis, keys: Keys
) -> None:
    # As a producer without the wake-up marker would: only the poller's own look finds it.
    due = time.time() + 2.0
    await redis.zadd(
        keys.schedule, {make_job(**{"class": "delays.note", "args": ["waiting"]}): due}
    )
    async with Worker(slow_poll, jobs=[note]):
        await wait_for(lambda: _ran(1), timeout=10)
    assert 0 <= _lateness("waiting", due) < LATE_AT_MOST


async def test_a_retry_is_due_and_runs_within_bound(
    slow_poll: Settings, redis: Redis, keys: Keys
) -> None:
    async with Worker(slow_poll, jobs=[flaky]) as worker, Client(slow_poll) as client:
        await worker.started.wait()
        await client.enqueue(flaky, "timed")

        async def filed() -> bool:
            return await redis.zcard(keys.retry) == 1

        await wait_for(filed, timeout=5)
        ((_, due),) = await redis.zrange(keys.retry, 0, 0, withscores=True)
        await wait_for(lambda: _ran(1), timeout=10)
    assert 0 <= _lateness("timed", due) < LATE_AT_MOST


async def test_two_workers_run_a_schedule_once_each_on_time(slow_poll: Settings) -> None:
    async with (
        Worker(slow_poll, jobs=[note]) as first,
        Worker(slow_poll, jobs=[note]) as second,
        Client(slow_poll) as client,
    ):
        await first.started.wait()
        await second.started.wait()
        dues = {}
        for i in range(10):
            dues[f"job{i}"] = time.time() + 0.5 + 0.1 * i
            await client.enqueue(note.options(delay=0.5 + 0.1 * i), f"job{i}")
        await wait_for(lambda: _ran(10), timeout=10)
    assert sorted(w for w, _ in runs) == sorted(dues)
    for what, due in dues.items():
        assert 0 <= _lateness(what, due) < LATE_AT_MOST, what


async def test_an_idle_poller_looks_no_more_often_than_its_interval(
    settings: Settings, redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries far ahead don't make it look more often; it doesn't spin on anything."""
    looks: list[float] = []
    real = scheduler.ScheduledPoller._look

    async def counted(self: Any) -> Any:
        looks.append(time.monotonic())
        return await real(self)

    monkeypatch.setattr(scheduler.ScheduledPoller, "_look", counted)
    far = time.time() + 3600
    await redis.zadd(keys.schedule, {orjson.dumps({"jid": "x", "queue": "q"}): far})
    await redis.zadd(keys.retry, {orjson.dumps({"jid": "y", "queue": "q"}): far})
    fast = settings.model_copy(update={"scheduled_poll_interval": 0.5})
    async with Worker(fast, jobs=[note]):
        await wait_for(lambda: _counted(looks, 1))
        start = time.monotonic()
        await wait_for(lambda: _after(start, 3.0), timeout=5)
    in_window = [t for t in looks if t >= start]
    # Every 0.25-0.75 s: 4 to 12 looks in 3 s, never a spin.
    assert len(in_window) <= 13, len(in_window)


async def _counted(looks: list[float], n: int) -> bool:
    return len(looks) >= n


async def _after(since: float, seconds: float) -> bool:
    return time.monotonic() - since >= seconds
