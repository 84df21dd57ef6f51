"""No handler can take a worker down: whatever it raises is its own job's failure.

And a plain ``def`` past its timeout, whose thread can't be stopped, never runs
twice at once: its slot stays taken until the thread returns.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.keys import Keys
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio


class HandlerOwnError(BaseException):
    """A BaseException of the handler's own, outside Exception."""


ESCAPES: dict[str, Callable[[], BaseException]] = {
    "SystemExit": lambda: SystemExit(3),
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
    "CancelledError": lambda: asyncio.CancelledError("the handler's own"),
    "HandlerOwnError": lambda: HandlerOwnError("not an Exception"),
}

ran: list[str] = []


@job(name="esc.raise", retry=3)
async def raise_async(kind: str) -> None:
    raise ESCAPES[kind]()


@job(name="esc.raise_sync", retry=3)
def raise_sync(kind: str) -> None:
    raise ESCAPES[kind]()


@job(name="esc.raise_once", retry=0)
async def raise_no_retry(kind: str) -> None:
    raise ESCAPES[kind]()


@job(name="esc.raise_discard", retry=False)
async def raise_discard(kind: str) -> None:
    ran.append(kind)
    raise ESCAPES[kind]()


@job(name="esc.ok")
async def ok(tag: str) -> None:
    ran.append(tag)


class Overlap:
    """Counts a sync handler's concurrent runs (enter/exit) from its threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = 0
        self.most = 0
        self.entered = 0
        self.exited = 0

    def enter(self) -> None:
        with self.lock:
            self.inside += 1
            self.entered += 1
            self.most = max(self.most, self.inside)

    def exit(self) -> None:
        with self.lock:
            self.inside -= 1
            self.exited += 1


overlap = Overlap()


def _retry_now(count: int, exc: BaseException, job: dict[str, Any]) -> float:
    return 0


@job(name="esc.slow_sync", retry=1, timeout=0.3, retry_in=_retry_now)
def slow_sync(seconds: float) -> None:
    overlap.enter()
    try:
        time.sleep(seconds)
    finally:
        overlap.exit()


ALL = [raise_async, raise_sync, raise_no_retry, raise_discard, ok, slow_sync]


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()
    global overlap  # noqa: PLW0603 - fresh counters per test
    overlap = Overlap()


class RunningWorker:
    """``worker.run()`` in a task of the test's own, so the test sees whether it ended."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.ended = False
        self.raised: BaseException | None = None

    async def run(self) -> None:
        try:
            await self.worker.run()
        except BaseException as exc:
            self.raised = exc
            raise
        finally:
            self.ended = True


async def _zset_entries(redis: Redis, key: str) -> list[dict[str, Any]]:
    return [orjson.loads(raw) for raw in await redis.zrange(key, 0, -1)]


async def _ran(tag: str) -> bool:
    return tag in ran


BY_NAME = {"async": raise_async, "sync": raise_sync, "async retry=0": raise_no_retry}


@pytest.mark.parametrize(
    ("handler", "kind", "target"),
    [
        *[("async", kind, "retry") for kind in ESCAPES],
        ("sync", "SystemExit", "retry"),
        ("sync", "KeyboardInterrupt", "retry"),
        ("sync", "HandlerOwnError", "retry"),
        ("async retry=0", "SystemExit", "dead"),
        ("async retry=0", "CancelledError", "dead"),
    ],
)
async def test_a_base_exception_from_a_handler_is_its_jobs_failure(
    settings: Settings, redis: Redis, keys: Keys, handler: str, kind: str, target: str
) -> None:
    running = RunningWorker(Worker(settings, jobs=ALL))
    async with anyio.create_task_group() as group, Client(settings) as client:
        group.start_soon(running.run)
        with anyio.fail_after(10):
            await running.worker.started.wait()
        jid = await client.enqueue(BY_NAME[handler], kind)
        key = keys.retry if target == "retry" else keys.dead

        async def filed() -> bool:
            return any(e["jid"] == jid for e in await _zset_entries(redis, key))

        await wait_for(filed)
        (entry,) = [e for e in await _zset_entries(redis, key) if e["jid"] == jid]
        assert entry["error_class"] == kind
        # The worker goes on: the next job runs, and run() has not ended.
        await client.enqueue(ok, "after")
        await wait_for(lambda: _ran("after"))
        assert not running.ended, f"run() ended ({running.raised!r})"
        assert await redis.llen(keys.queue("default")) == 0
        running.worker.stop()
    assert running.raised is None
    # Filed once, never requeued by the shutdown.
    assert await redis.llen(keys.queue("default")) == 0
    assert [e["jid"] for e in await _zset_entries(redis, key)] == [jid]


@pytest.mark.parametrize("kind", ["SystemExit", "CancelledError"])
async def test_a_retry_false_job_raising_a_base_exception_is_discarded_not_requeued(
    settings: Settings, redis: Redis, keys: Keys, kind: str
) -> None:
    for _ in range(2):  # a second worker run finds nothing back on the queue
        running = RunningWorker(Worker(settings, jobs=ALL))
        async with anyio.create_task_group() as group, Client(settings) as client:
            group.start_soon(running.run)
            with anyio.fail_after(10):
                await running.worker.started.wait()
            if not ran:
                await client.enqueue(raise_discard, kind)
                await wait_for(lambda: _ran(kind))
            await client.enqueue(ok, "after")
            await wait_for(lambda: _ran("after"))
            assert not running.ended
            running.worker.stop()
        ran.remove("after")
        assert running.raised is None
        assert await redis.llen(keys.queue("default")) == 0
    assert ran == [kind]  # ran once, over both worker runs
    assert await redis.zcard(keys.retry) == 0
    assert await redis.zcard(keys.dead) == 0


async def test_a_sync_handler_past_its_timeout_never_runs_twice_at_once(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cogworker_async")
    running = RunningWorker(Worker(settings, jobs=ALL))
    async with anyio.create_task_group() as group, Client(settings) as client:
        group.start_soon(running.run)
        with anyio.fail_after(10):
            await running.worker.started.wait()
        # Runs 1.2 s against a 0.3 s timeout; its retry is due at once.
        jid = await client.enqueue(slow_sync, 1.2)

        async def dead() -> bool:
            return await redis.zcard(keys.dead) == 1

        await wait_for(dead, timeout=15)
        (entry,) = await _zset_entries(redis, keys.dead)
        assert entry["jid"] == jid
        assert entry["error_class"] == "JobTimeout"
        running.worker.stop()
    assert overlap.most == 1, "the retry started while the first run's thread still ran"
    assert overlap.entered == 2  # the first run and its one retry
    assert overlap.exited == 2  # each filed only once its thread had returned
    overran = [r.getMessage() for r in caplog.records if "after its timeout" in r.getMessage()]
    # One warning per run, each naming the job, logged once it passed its timeout.
    assert len(overran) == 2, overran
    assert all(jid in m and "esc.slow_sync" in m for m in overran)


@job(name="esc.sync_sleep")
def sync_sleep(seconds: float) -> None:
    overlap.enter()
    try:
        time.sleep(seconds)
    finally:
        overlap.exit()


async def _in_thread(n: int) -> bool:
    return overlap.entered >= n


async def test_shutdown_waits_for_a_thread_it_cannot_stop_and_settles_its_job(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    """At the end of shutdown_timeout a thread still runs: never requeued beside it."""
    caplog.set_level(logging.WARNING, logger="cogworker_async")
    quick = settings.model_copy(update={"shutdown_timeout": 0.3})
    running = RunningWorker(Worker(quick, jobs=[sync_sleep]))
    async with anyio.create_task_group() as group, Client(quick) as client:
        group.start_soon(running.run)
        with anyio.fail_after(10):
            await running.worker.started.wait()
        jid = await client.enqueue(sync_sleep, 1.5)
        await wait_for(lambda: _in_thread(1))
        running.worker.stop()
        with anyio.fail_after(10):
            while not running.ended:
                # Never back on its queue while its thread runs.
                assert await redis.llen(keys.queue("default")) == 0
                await anyio.sleep(0.02)
    assert overlap.exited == 1
    assert running.raised is None
    # It finished during the shutdown: acked, not requeued, nothing left behind.
    assert await redis.llen(keys.queue("default")) == 0
    assert await redis.llen(keys.in_progress(running.worker.identity)) == 0
    assert int(await redis.get(keys.stats_processed) or 0) == 1
    waited = [r.getMessage() for r in caplog.records if "waiting for it" in r.getMessage()]
    assert len(waited) == 1
    assert jid in waited[0]


async def test_a_second_stop_leaves_the_thread_and_keeps_its_job_on_the_list(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cogworker_async")
    quick = settings.model_copy(update={"shutdown_timeout": 0.3})
    worker = Worker(quick, jobs=[sync_sleep])
    running = RunningWorker(worker)
    async with anyio.create_task_group() as group, Client(quick) as client:
        group.start_soon(running.run)
        with anyio.fail_after(10):
            await worker.started.wait()
        await client.enqueue(sync_sleep, 2.0)
        await wait_for(lambda: _in_thread(1))
        worker.stop()

        async def waiting() -> bool:  # past shutdown_timeout: the shutdown waits for it
            return any("waiting for it" in r.getMessage() for r in caplog.records)

        await wait_for(waiting)
        assert not running.ended
        worker.stop()
        with anyio.fail_after(5):
            while not running.ended:
                await anyio.sleep(0.02)
    assert overlap.exited == 0, "the thread still runs"
    # Kept on this process's list for orphan recovery, not requeued beside it.
    assert await redis.llen(keys.queue("default")) == 0
    assert await redis.llen(keys.in_progress(worker.identity)) == 1
    assert await redis.sismember(keys.in_progress_identities, worker.identity)
    await wait_for(lambda: _exited(1))


async def _exited(n: int) -> bool:
    return overlap.exited >= n
