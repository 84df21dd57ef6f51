"""An idle worker blocks instead of polling, and still picks new work up at once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.worker import fetcher as fetcher_module
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

ran: list[int] = []


@job(name="idle.note")
async def note(i: int) -> None:
    ran.append(i)


@pytest.fixture
def fetch_calls(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each fetch.lua call of the worker's fetcher went out."""
    real = fetcher_module.commands.fetch
    calls: list[float] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(time.monotonic())
        return await real(*args, **kwargs)

    monkeypatch.setattr(fetcher_module.commands, "fetch", counted)
    return calls


@pytest.mark.parametrize(
    ("queues", "most_per_second"),
    [
        # One queue: BLMOVE waits; nothing else asks until it brings a job.
        (("default",), 1),
        # Several: BZPOPMIN on the markers, and one look per wake-up or
        # timeout (the fallback for producers that don't touch the marker).
        (("a", "b", "c"), 6),
    ],
)
async def test_an_idle_worker_does_not_spin_on_empty_queues(
    settings: Settings, fetch_calls: list[float], queues: tuple[str, ...], most_per_second: int
) -> None:
    ran.clear()
    idle = settings.model_copy(update={"queues": queues, "fetch_idle_max_interval": 0.5})
    async with Client(idle) as client, Worker(idle, jobs=[note]):
        await wait_for(lambda: _at_least(fetch_calls, 1))
        window_start = time.monotonic()
        await wait_for(lambda: _elapsed(window_start, 2.0), timeout=5)
        in_window = [t for t in fetch_calls if t >= window_start]
        assert len(in_window) <= 2 * most_per_second, len(in_window)
        # ...and still wakes at once for new work, then drains it all.
        started = time.monotonic()
        await client.enqueue(note.options(queue=queues[-1]), 1)
        await wait_for(lambda: _ran(1))
        assert time.monotonic() - started < 0.4
        await client.enqueue_many(note.options(queue=queues[0]), [(i,) for i in range(2, 302)])
        await wait_for(lambda: _ran(301))


async def _at_least(calls: list[float], count: int) -> bool:
    return len(calls) >= count


async def _elapsed(since: float, seconds: float) -> bool:
    return time.monotonic() - since >= seconds


async def _ran(count: int) -> bool:
    return len(ran) >= count
