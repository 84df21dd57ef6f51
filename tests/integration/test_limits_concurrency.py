"""Concurrency limits (``limits.concurrency``): at most N jobs of a key run at
once across processes; a job over the limit is parked on its key, in order,
never retried nor failed, and let in when a slot frees. The slot is a hold of
the running job (``holds.LIMIT_SLOT``), released by whichever step ends it:
an ack, a retry filing, a dead filing, an abort."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job, limits
from cogworker_async.jobs import JobFunction
from cogworker_async.keys import Keys
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

running: dict[str, int] = {}
most: dict[str, int] = {}
ended: list[str] = []
starts: list[str] = []
gates: dict[str, asyncio.Event] = {}


async def _run(key: str, tag: str, hold: float) -> None:
    running[key] = running.get(key, 0) + 1
    most[key] = max(most.get(key, 0), running[key])
    starts.append(tag)
    try:
        if tag in gates:
            await gates[tag].wait()
        else:
            await asyncio.sleep(hold)
    finally:
        running[key] -= 1
        ended.append(tag)


@job(name="lim.global", limits=[limits.concurrency("stripe", 2)])
async def global_two(tag: str) -> None:
    await _run("stripe", tag, 0.05)


@job(name="lim.per_key", limits=[limits.concurrency(lambda account, tag: f"acct:{account}", 1)])
async def per_account(account: str, tag: str) -> None:
    await _run(f"acct:{account}", tag, 0.02)


@job(
    name="lim.failing",
    limits=[limits.concurrency("flaky", 1)],
    retry_in=lambda *_: 600,
)
async def failing(tag: str) -> None:
    starts.append(tag)
    if tag in gates:
        await gates[tag].wait()
    raise ValueError(f"{tag} failed")


start_times: list[float] = []


@job(name="lim.window", limits=[limits.window("w", 3, 1.0)])
async def windowed(tag: str) -> None:
    start_times.append(time.time())
    starts.append(tag)


tries: dict[str, int] = {}


@job(name="lim.rates", limits=[limits.bucket("bk", 2, 4.0), limits.leaky("lk", 5, 1.0)])
async def rated(tag: str) -> None:
    start_times.append(time.time())
    starts.append(tag)


@job(name="lim.backoff", limits=[limits.concurrency(lambda tag: "api", 2)])
async def calls_api(tag: str) -> None:
    tries[tag] = tries.get(tag, 0) + 1
    start_times.append(time.time())
    starts.append(tag)
    if tag == "b0" and tries[tag] == 1:
        raise limits.BackOff("api", 1.0)  # a 429 with Retry-After: 1


settled: list[Any] = []


@job(name="lim.points", limits=[limits.points("api", 10, 100, cost=lambda rows: rows)])
async def costly(rows: int) -> None:
    starts.append(f"p{rows}")
    settled.append(await limits.settle("api", 1))  # it cost 1, not `rows`
    for bad in (lambda: limits.settle("api", 1), lambda: limits.settle("other", 1)):
        try:
            await bad()
        except (RuntimeError, ValueError) as exc:
            settled.append(str(exc))


ALL: list[JobFunction[Any, Any]] = [
    costly,
    global_two,
    per_account,
    failing,
    windowed,
    calls_api,
    rated,
]


@pytest.fixture(autouse=True)
def _clear() -> None:
    for book in (running, most, gates):
        book.clear()
    ended.clear()
    starts.clear()
    start_times.clear()
    tries.clear()
    settled.clear()


async def _nothing_held(redis: Redis, keys: Keys, *names: str) -> bool:
    for name in names:
        if await redis.scard(keys.limit_slots(name)) or await redis.llen(keys.limit_parked(name)):
            return False
    return True


async def test_a_global_limit_is_never_over_admitted_and_every_job_runs(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(global_two, [(f"g{i}",) for i in range(12)])
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _count(ended, 12), timeout=30)
            await wait_for(lambda: _nothing_held(redis, keys, "stripe"))
    assert most["stripe"] == 2  # the limit, and used whole
    assert await redis.get(keys.limits_used) == b"1"  # said before the first was written
    assert sorted(starts) == sorted(f"g{i}" for i in range(12))  # each once
    assert await redis.get(keys.stats_failed) is None  # none failed for it


async def test_a_full_key_parks_its_jobs_in_order_and_never_blocks_another_key(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    gates["a0"] = asyncio.Event()
    async with Client(settings) as client:
        await client.enqueue(per_account, "a", "a0")
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _started("a0"))
            for i in range(1, 4):
                await client.enqueue(per_account, "a", f"a{i}")
            await client.enqueue(per_account, "b", "b0")
            # b's job runs while a's first still holds a's one slot...
            await wait_for(lambda: _count(ended, 1), timeout=20)
            assert ended == ["b0"]
            # ...and a's others wait parked, not running, not retried.
            await wait_for(lambda: _parked(redis, keys.limit_parked("acct:a"), 3))
            assert await redis.smembers(keys.limit_slots("acct:a")) != set()
            gates["a0"].set()
            await wait_for(lambda: _count(ended, 5), timeout=20)
            await wait_for(lambda: _nothing_held(redis, keys, "acct:a", "acct:b"))
    assert [t for t in starts if t.startswith("a")] == ["a0", "a1", "a2", "a3"]  # in order
    assert most["acct:a"] == 1
    assert await redis.get(keys.stats_failed) is None


async def test_a_failure_filed_for_retry_or_dead_frees_its_slot(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    gates["f0"] = asyncio.Event()
    async with Client(settings) as client:
        await client.enqueue(failing, "f0")  # filed for a retry in 10 minutes
        await client.enqueue(failing.options(retry=False), "f1")  # dropped
        await client.enqueue(failing.options(retry=0), "f2")  # dead
        await client.enqueue(failing, "f3")
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _started("f0"))
            await wait_for(lambda: _parked(redis, keys.limit_parked("flaky"), 3))
            gates["f0"].set()
            # Each ending let the next parked job in: all four ran, one at a time.
            await wait_for(lambda: _count(starts, 4), timeout=20)
            await wait_for(lambda: _nothing_held(redis, keys, "flaky"))
            await wait_for(lambda: _zcard(redis, keys.retry, 2))
    assert starts == ["f0", "f1", "f2", "f3"]
    assert await redis.zcard(keys.dead) == 1


async def test_an_aborted_running_job_frees_its_slot(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    gates["x0"] = asyncio.Event()
    gates["x1"] = asyncio.Event()
    async with Client(settings) as client:
        first = await client.enqueue(per_account, "x", "x0")
        assert first is not None
        await client.enqueue(per_account, "x", "x1")
        async with Worker(settings, jobs=ALL) as worker:
            assert worker.aborts is not None
            await worker.aborts.subscribed.wait()
            await wait_for(lambda: _started("x0"))
            await wait_for(lambda: _parked(redis, keys.limit_parked("acct:x"), 1))
            await first.abort()
            await wait_for(lambda: _started("x1"))
            assert await redis.smembers(keys.limit_slots("acct:x")) != {first.jid.encode()}
            gates["x1"].set()
            await wait_for(lambda: _nothing_held(redis, keys, "acct:x"))


async def test_a_window_lets_n_start_per_period_and_the_timer_lets_the_rest_in(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(windowed, [(f"w{i}",) for i in range(8)])
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _count(starts, 8), timeout=30)
            await wait_for(lambda: _nothing_held(redis, keys, "w"))
    assert sorted(starts) == sorted(f"w{i}" for i in range(8))
    assert starts[:3] == ["w0", "w1", "w2"]  # the first window, in order
    # 3 a second: the 4th start a second after the 1st, the 7th two seconds.
    # (Slack for the delivery from admission to the handler on a loaded box.)
    at = sorted(start_times)
    for i in range(len(at) - 3):
        assert at[i + 3] - at[i] > 0.6, at
    assert at[-1] - at[0] > 1.6, at
    assert await redis.get(keys.stats_failed) is None


async def test_a_back_off_pauses_the_key_and_runs_the_job_again_without_a_retry(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        await client.enqueue(calls_api, "b0")
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _started("b0"))
            await client.enqueue(calls_api, "b1")  # the key is paused: held
            await wait_for(lambda: _count(starts, 3), timeout=20)
            await wait_for(lambda: _nothing_held(redis, keys, "api"))
    assert tries == {"b0": 2, "b1": 1}
    assert starts[1:] == ["b0", "b1"]  # the backed-off job first, once the pause ended
    assert start_times[1] - start_times[0] > 0.8  # nothing of the key ran for the pause
    assert await redis.zcard(keys.retry) == 0
    assert await redis.get(keys.stats_failed) is None


async def test_a_back_off_redis_refuses_is_filed_as_a_failure(
    settings: Settings, redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refused(*_: object, **__: object) -> bool:
        raise ConnectionError("Redis went away")

    monkeypatch.setattr("cogworker_async.worker.backoff.back_off", refused)
    async with Client(settings) as client:
        await client.enqueue(calls_api, "b0")
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _zcard(redis, keys.retry, 1), timeout=20)
    [entry] = await redis.zrange(keys.retry, 0, -1)
    assert b"BackOff" in entry  # filed as the failure it was, not lost


async def test_a_bucket_and_a_smooth_rate_both_hold(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(rated, [(f"r{i}",) for i in range(6)])
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _count(starts, 6), timeout=30)
            await wait_for(lambda: _nothing_held(redis, keys, "bk", "lk"))
    assert starts == [f"r{i}" for i in range(6)]  # in order
    # The smooth rate (5 a second, no burst) spaces them 0.2 s apart: 1 s for 6;
    # the bucket (2, then 4 a second) is never the tighter one here.
    at = start_times
    assert at[-1] - at[0] > 0.8, at
    assert await redis.get(keys.stats_failed) is None


async def test_points_settle_the_real_cost_from_the_handler(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    """A budget of 10 points per 100 s (0.1 a second): 8 points estimated, 1 spent,
    so a second job of 8 starts at once instead of in 60 s."""
    async with Client(settings) as client:
        await client.enqueue(costly, 8)
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _started("p8"))
            await client.enqueue(costly, 7)
            await wait_for(lambda: _started("p7"), timeout=20)
            await wait_for(lambda: _count(settled, 6), timeout=20)
    first, twice, other = settled[:3]
    assert 9 <= first < 9.5  # 10 - 8 + 7 given back
    assert twice == "the cost of 'api' was settled already in this run"
    assert other == "this job has no points limit 'other'"
    with pytest.raises(RuntimeError, match="outside a running job"):
        await limits.settle("api", 1)


async def _count(book: list[str], n: int) -> bool:
    return len(book) >= n


async def _started(tag: str) -> bool:
    return tag in starts


async def _parked(redis: Redis, key: str, n: int) -> bool:
    return int(await redis.llen(key)) >= n


async def _zcard(redis: Redis, key: str, n: int) -> bool:
    return int(await redis.zcard(key)) >= n


async def test_basic_fetch_holds_and_releases_the_same_way(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    basic = settings.model_copy(update={"fetch": "basic"})
    async with Client(basic) as client:
        await client.enqueue_many(global_two, [(f"g{i}",) for i in range(8)])
        async with Worker(basic, jobs=ALL):
            await wait_for(lambda: _count(ended, 8), timeout=30)
            await wait_for(lambda: _nothing_held(redis, keys, "stripe"), timeout=20)
    assert most["stripe"] == 2
    assert sorted(starts) == sorted(f"g{i}" for i in range(8))


async def test_jobs_of_other_keys_behind_many_held_ones_are_not_blocked(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    gates["h0"] = asyncio.Event()
    async with Client(settings) as client:
        await client.enqueue(per_account, "h", "h0")
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _started("h0"))
            await client.enqueue_many(per_account, [("h", f"h{i}") for i in range(1, 200)])
            await client.enqueue(per_account, "other", "o0")  # behind 199 of a full key
            await wait_for(lambda: _count(ended, 1), timeout=20)
            assert ended == ["o0"]
            assert await redis.llen(keys.limit_parked("acct:h")) == 199
            gates["h0"].set()
            await wait_for(lambda: _count(ended, 201), timeout=60)
    assert [t for t in starts if t.startswith("h")] == [f"h{i}" for i in range(200)]


async def test_a_client_says_limits_are_in_use_again_after_redis_lost_it(
    settings: Settings, redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cogworker_async.client import enqueueing

    monkeypatch.setattr(enqueueing, "LIMITS_MARK_EVERY", 0.2)
    async with Client(settings) as client:
        await client.enqueue(global_two, "m0")
        assert await redis.get(keys.limits_used) == b"1"
        await redis.delete(keys.limits_used)  # a restart without persistence
        await asyncio.sleep(0.3)
        await client.enqueue_many(global_two, [("m1",)])
        assert await redis.get(keys.limits_used) == b"1"
