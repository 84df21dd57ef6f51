"""Aborts racing a job's completion, by the thousand (issue 21, items 1 and 2).

Each job is aborted at a random moment around its end: while it waits, while
its handler runs, just after its handler returned (a periodic run's result
being written, its ack on its way), or after it ended. Whatever the moment,
the worker never stops and never mistakes an abort for a shutdown; each job
ends one way only (processed or aborted, never both, never run twice); and an
abort answered "removed" or "cancelling" means the job never runs again: a
failing job aborted while its failure is filed is not retried.

``COGWORKER_ABORT_RACES`` sets the number of jobs a test races (300 in the
normal suite: a few seconds each; ``make test-py312`` runs thousands, on
Python 3.11 and 3.12).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async import (
    AbortOutcome,
    Client,
    JobFunction,
    Settings,
    Worker,
    api,
    current_job,
    job,
)
from cogworker_async.keys import Keys
from cogworker_async.periodic import every
from cogworker_async.periodic.running import PeriodicRuns
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

RACES = int(os.environ.get("COGWORKER_ABORT_RACES", "300"))
ABORTERS = 8  # abort loops at once

runs: Counter[str] = Counter()
_rng = random.Random(21)


def _pause(pause: float | None) -> float:
    """A run's length: given, or (a periodic run's) drawn around an abort's own latency."""
    return _rng.uniform(0.0, 0.006) if pause is None else pause


@job(name="race.async_quick")
async def async_quick(pause: float | None = None) -> str:
    runs[current_job().jid] += 1
    await asyncio.sleep(_pause(pause))
    return "done"


@job(name="race.sync_quick")
def sync_quick(pause: float | None = None) -> str:
    runs[current_job().jid] += 1
    time.sleep(_pause(pause))
    return "done"


@job(name="race.async_fails", retry=5, retry_in=lambda count, exc, job: 600)
async def async_fails(pause: float | None = None) -> None:
    runs[current_job().jid] += 1
    await asyncio.sleep(_pause(pause))
    raise RuntimeError("fails, to be retried in 10 min")


@job(name="race.sync_fails", retry=5, retry_in=lambda count, exc, job: 600)
def sync_fails(pause: float | None = None) -> None:
    runs[current_job().jid] += 1
    time.sleep(_pause(pause))
    raise RuntimeError("fails, to be retried in 10 min")


HANDLERS: dict[str, JobFunction[Any, Any]] = {
    "async": async_quick,
    "sync": sync_quick,
    "async_fails": async_fails,
    "sync_fails": sync_fails,
}
PERIODIC = [
    every(86_400, async_quick, name="race_async"),
    every(86_400, sync_quick, name="race_sync"),
]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    runs.clear()


async def _count(redis: Redis, key: str) -> int:
    return int(await redis.get(key) or 0)


async def _in_progress(redis: Redis, keys: Keys) -> int:
    total = 0
    async for key in redis.scan_iter(match=keys.in_progress_prefix + "*"):
        total += int(await redis.llen(key))
    return total


async def _race(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    start_one: Callable[[Client, random.Random], Awaitable[str]],
    *,
    fails: bool = False,
) -> None:
    """Start ``RACES`` jobs and abort each at a random moment around its end; then check
    the worker still runs and every job ended one way, as its abort's answer said."""
    outcomes: dict[str, AbortOutcome] = {}
    ended = anyio.Event()
    worker = Worker(settings, jobs=list(HANDLERS.values()), periodic=PERIODIC)

    async def run_worker() -> None:
        await worker.run()
        ended.set()  # by itself: the run ended before the test asked it to stop

    async with anyio.create_task_group() as group:
        group.start_soon(run_worker)
        with anyio.fail_after(20):
            await worker.started.wait()
            assert worker.aborts is not None
            await worker.aborts.subscribed.wait()
        async with Client(settings) as client:

            async def aborter(seed: int, count: int) -> None:
                rng = random.Random(seed)
                for _ in range(count):
                    jid = await start_one(client, rng)
                    await asyncio.sleep(rng.uniform(0.0, 0.002))
                    outcomes[jid] = await client.abort(jid)
                    assert not ended.is_set(), "the worker stopped during the races"

            share = RACES // ABORTERS
            async with anyio.create_task_group() as aborters:
                for seed in range(ABORTERS):
                    aborters.start_soon(aborter, seed, share)
            total = share * ABORTERS

            async def all_settled() -> bool:
                done = await _count(redis, keys.stat("aborted"))
                if fails:
                    done += await redis.zcard(keys.retry)
                else:
                    done += await _count(redis, keys.stats_processed)
                return done >= total and await _in_progress(redis, keys) == 0

            await wait_for(all_settled, timeout=30 + RACES / 50)
            # Still serving: a job after the races runs and completes.
            last = await client.enqueue(async_quick, 0.0)
            assert last is not None
            await wait_for(lambda: _processed(redis, keys, last.jid), timeout=20)
        assert not ended.is_set(), "the worker stopped during the races"
        worker.stop()
    await _check(redis, keys, outcomes, fails=fails)


async def _processed(redis: Redis, keys: Keys, jid: str) -> bool:
    return runs[jid] == 1 and await _in_progress(redis, keys) == 0


async def _check(
    redis: Redis, keys: Keys, outcomes: dict[str, AbortOutcome], *, fails: bool
) -> None:
    answered = Counter(outcome.value for outcome in outcomes.values())
    aborted = await _count(redis, keys.stat("aborted"))
    retrying = [e for e in await redis.zrange(keys.retry, 0, -1) if isinstance(e, bytes)]
    retried_jids = {jid for jid in outcomes if any(jid.encode() in e for e in retrying)}
    twice = [jid for jid, n in runs.items() if n > 1]
    assert twice == [], f"jobs run twice: {twice[:5]} ({answered})"
    if not fails:  # (a failing job may have run once before its retry was removed)
        removed_but_ran = [j for j, o in outcomes.items() if o is AbortOutcome.REMOVED and runs[j]]
        assert removed_but_ran == [], f"removed, yet ran: {removed_but_ran[:5]}"
    # Acknowledged means never run again: a failing job answered "cancelling" is
    # filed as aborted, not put in retry (item 2).
    kept_for_retry = sorted(j for j in retried_jids if outcomes[j].aborted)
    assert kept_for_retry == [], (
        f"{len(kept_for_retry)} of {answered['cancelling']} aborts answered 'cancelling' "
        f"went to retry: {kept_for_retry[:5]}"
    )
    assert await redis.zcard(keys.dead) == 0
    if fails:
        assert aborted + len(retrying) == len(outcomes)
    else:
        assert aborted + await _count(redis, keys.stats_processed) == len(outcomes) + 1
        assert await _count(redis, keys.stats_failed) == 0
        assert len(retrying) == 0
    assert aborted >= answered["removed"]


def _plain(kind: str) -> Callable[[Client, random.Random], Awaitable[str]]:
    async def start_one(client: Client, rng: random.Random) -> str:
        handle = await client.enqueue(HANDLERS[kind], rng.uniform(0.0, 0.006))
        assert handle is not None
        return handle.jid

    return start_one


def _periodic(
    name: str, redis: Redis, keys: Keys
) -> Callable[[Client, random.Random], Awaitable[str]]:
    async def start_one(client: Client, rng: random.Random) -> str:
        jid = await api.run_periodic_now(redis, keys, name)
        assert jid is not None
        return jid

    return start_one


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_aborts_racing_plain_jobs(
    settings: Settings, redis: Redis, keys: Keys, kind: str
) -> None:
    await _race(settings, redis, keys, _plain(kind))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["race_async", "race_sync"])
async def test_aborts_racing_periodic_runs(
    settings: Settings, redis: Redis, keys: Keys, name: str
) -> None:
    """Run now, then abort: the abort lands while the run's result is being written."""
    await _race(settings, redis, keys, _periodic_after_published(name, redis, keys))


def _periodic_after_published(
    name: str, redis: Redis, keys: Keys
) -> Callable[[Client, random.Random], Awaitable[str]]:
    start = _periodic(name, redis, keys)
    published = False

    async def start_one(client: Client, rng: random.Random) -> str:
        nonlocal published
        if not published:

            async def entry_published() -> bool:
                return any(info.name == name for info in await api.periodic_entries(redis, keys))

            await wait_for(entry_published, timeout=20)
            published = True
        return await start(client, rng)

    return start_one


async def test_a_stray_cancellation_never_ends_a_processor(
    settings: Settings, redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """A cancellation nobody of ours asked for, raised after a job's handler returned
    (here: by the write of a periodic run's result), is logged and the processor goes
    on; the worker is not stopped by it."""
    record = PeriodicRuns.record
    strays: list[str] = []

    async def cancelled_once(self: PeriodicRuns, job: dict[str, Any], *args: Any) -> None:
        if not strays:
            strays.append(job["jid"])
            raise asyncio.CancelledError("stray")
        await record(self, job, *args)

    monkeypatch.setattr(PeriodicRuns, "record", cancelled_once)
    one = settings.model_copy(update={"concurrency": 1})
    ended = anyio.Event()
    worker = Worker(one, jobs=list(HANDLERS.values()), periodic=PERIODIC)

    async def run_worker() -> None:
        await worker.run()
        ended.set()

    async with anyio.create_task_group() as group, Client(one) as client:
        group.start_soon(run_worker)
        with anyio.fail_after(20):
            await worker.started.wait()
        start = _periodic_after_published("race_async", redis, keys)
        jid = await start(client, random.Random(0))
        await wait_for(lambda: _processed(redis, keys, jid))
        after = await client.enqueue(async_quick, 0.0)
        assert after is not None
        await wait_for(lambda: _processed(redis, keys, after.jid))
        assert not ended.is_set(), "a stray cancellation stopped the worker"
        worker.stop()
    assert strays == [jid]
    assert any("stray cancellation" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["async_fails", "sync_fails"])
async def test_an_answered_abort_of_a_failing_job_is_kept(
    settings: Settings, redis: Redis, keys: Keys, kind: str
) -> None:
    await _race(settings, redis, keys, _plain(kind), fails=True)
