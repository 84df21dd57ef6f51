"""A worker end to end, in process, against real Redis."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

import orjson
import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError

from cogworker_async import Client, JobTimeout, Settings, Worker, current_job, job
from cogworker_async.keys import Keys
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

seen: list[tuple[str, object]] = []


@job(name="e2e.add")
async def add(a: int, b: int) -> None:
    seen.append(("add", a + b))


@job(name="e2e.ctx")
async def ctx() -> None:
    info = current_job()
    seen.append(("ctx", (info.jid, info.queue, info.retry_count)))


@job(name="e2e.sync")
def sync_job(x: int) -> None:
    time.sleep(0.01)
    seen.append(("sync", x))


@job(name="e2e.slow", timeout=0.2)
async def slow() -> None:
    await asyncio.sleep(5)


@job(name="e2e.boom", retry=2)
async def boom() -> None:
    raise ValueError("boom")


@job(name="e2e.discard", retry=False)
async def discard() -> None:
    raise ValueError("never again")


ALL = [add, ctx, sync_job, slow, boom, discard]


@pytest.fixture(autouse=True)
def _clear() -> None:
    seen.clear()


async def settled(redis: Redis, keys: Keys, worker: Worker) -> bool:
    """Nothing queued, nothing in progress for this worker."""
    queued = sum([await redis.llen(keys.queue(q)) for q in ("default", "a", "b", "c")])
    return queued == 0 and await redis.llen(keys.in_progress(worker.identity)) == 0


async def test_thousand_jobs_leave_nothing_in_progress(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(add, [(i, 1) for i in range(1000)])
    worker = Worker(settings.model_copy(update={"concurrency": 20}), jobs=ALL)
    async with worker:
        await wait_for(lambda: _count("add", 1000))
        await wait_for(lambda: settled(redis, keys, worker))
    assert sorted(v for k, v in seen if k == "add") == list(range(1, 1001))
    assert int(await redis.get(keys.stats_processed)) == 1000
    assert await redis.exists(keys.in_progress(worker.identity)) == 0
    assert await redis.exists(keys.process(worker.identity)) == 0  # deregistered


async def _count(kind: str, n: int) -> bool:
    return sum(1 for k, _ in seen if k == kind) >= n


async def test_context_sync_handlers_and_by_name(settings: Settings, redis: Redis) -> None:
    async with Client(settings) as client:
        jid = await client.enqueue(ctx)
        await client.enqueue("e2e.sync", 7)
        await client.enqueue(add.options(queue="default"), 2, 3)
    async with Worker(settings, jobs=ALL):
        await wait_for(lambda: _all_async(_count("ctx", 1), _count("sync", 1), _count("add", 1)))
    assert ("ctx", (jid, "default", 0)) in seen
    assert ("sync", 7) in seen
    assert ("add", 5) in seen


async def _all_async(*conditions: Awaitable[bool]) -> bool:
    return all([await c for c in conditions])


async def test_failures_are_filed_with_their_errors(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        boom_jid = await client.enqueue(boom)
        slow_jid = await client.enqueue(slow.options(retry=0))
        unknown_jid = await client.enqueue("e2e.nobody", 1)
        await client.enqueue(discard)
        await redis.lpush(keys.queue("default"), b"{not json", b'{"jid": "x", "class": "a"}')
        await client.enqueue_many(add, [(i, 0) for i in range(50)])
    worker = Worker(settings, jobs=ALL)
    async with worker:
        await wait_for(lambda: _count("add", 50))
        await wait_for(lambda: _stat(redis, keys.stats_failed, 6))
        await wait_for(lambda: settled(redis, keys, worker))
    retry = {orjson.loads(e)["jid"]: orjson.loads(e) for e in await redis.zrange(keys.retry, 0, -1)}
    dead = [orjson.loads(e) for e in await redis.zrange(keys.dead, 0, -1)]
    assert retry[boom_jid]["error_class"] == "ValueError"
    assert retry[boom_jid]["retry_count"] == 0
    by_jid = {d["jid"]: d for d in dead}
    # Unknown: buried at once (unknown_job_retries defaults to 0).
    assert by_jid[unknown_jid]["error_class"] == "UnknownJob"
    assert by_jid[slow_jid]["error_class"] == JobTimeout.__name__
    raws = sorted(d["raw"] for d in dead if d["error_class"] == "UnparseableJob")
    assert raws == sorted(["{not json", '{"jid": "x", "class": "a"}'])
    assert all("error_message" in d for d in dead)
    # retry=False: discarded, in neither set
    assert len(retry) == 1
    assert len(dead) == 4


async def _stat(redis: Redis, key: str, at_least: int) -> bool:
    return int(await redis.get(key) or 0) >= at_least


async def test_retry_backoff_then_dead(settings: Settings, redis: Redis, keys: Keys) -> None:
    async with Client(settings) as client:
        jid = await client.enqueue(boom)
    async with Worker(settings, jobs=ALL):
        await wait_for(lambda: _zcard(redis, keys.retry, 1))
        # Make the retry due now instead of in 15+ seconds.
        entry = (await redis.zrange(keys.retry, 0, -1))[0]
        await redis.zadd(keys.retry, {entry: 0})
        await wait_for(lambda: _retry_count_is(redis, keys, jid, 1))
        entry = (await redis.zrange(keys.retry, 0, -1))[0]
        await redis.zadd(keys.retry, {entry: 0})
        await wait_for(lambda: _zcard(redis, keys.dead, 1))
    dead = orjson.loads((await redis.zrange(keys.dead, 0, -1))[0])
    assert dead["jid"] == jid
    assert dead["retry_count"] == 2
    assert "retried_at" in dead
    assert "failed_at" in dead


async def _retry_count_is(redis: Redis, keys: Keys, jid: str | None, count: int) -> bool:
    for entry in await redis.zrange(keys.retry, 0, -1):
        job_ = orjson.loads(entry)
        if job_["jid"] == jid and job_["retry_count"] == count:
            return True
    return False


async def _zcard(redis: Redis, key: str, n: int) -> bool:
    return await redis.zcard(key) >= n


async def test_delayed_job_waits_in_schedule(settings: Settings, redis: Redis, keys: Keys) -> None:
    async with Client(settings) as client:
        await client.enqueue(add.options(delay=1.0), 40, 2)
    assert await redis.zcard(keys.schedule) == 1
    started = time.monotonic()
    async with Worker(settings, jobs=ALL):
        await wait_for(lambda: _count("add", 1), timeout=10)
    assert time.monotonic() - started >= 0.5
    assert await redis.zcard(keys.schedule) == 0


async def test_paused_queue_is_not_fetched(settings: Settings, redis: Redis, keys: Keys) -> None:
    multi = settings.model_copy(update={"queues": ("a", "b")})
    async with Client(multi) as client:
        await client.enqueue(add.options(queue="a"), 1, 1)
        await redis.sadd(keys.paused, "b")
        await client.enqueue(add.options(queue="b"), 2, 2)
        async with Worker(multi, jobs=ALL):
            await wait_for(lambda: _count("add", 1))
            await client.enqueue(add.options(queue="a"), 3, 3)
            await wait_for(lambda: _count("add", 2))
            assert await redis.llen(keys.queue("b")) == 1
            await redis.srem(keys.paused, "b")
            await wait_for(lambda: _count("add", 3))
    assert sorted(v for k, v in seen if k == "add") == [2, 4, 6]


async def test_weighted_queues_all_drain(settings: Settings, redis: Redis, keys: Keys) -> None:
    multi = settings.model_copy(update={"queues": ("a:3", "b:2", "c:1")})
    async with Client(multi) as client:
        for q in ("a", "b", "c"):
            await client.enqueue_many(add.options(queue=q), [(i, 0) for i in range(100)])
    worker = Worker(multi, jobs=ALL)
    async with worker:
        await wait_for(lambda: _count("add", 300))
        await wait_for(lambda: settled(redis, keys, worker))


async def test_pickup_is_fast_on_an_idle_multi_queue_worker(settings: Settings, keys: Keys) -> None:
    """Idle processors block on wake-up markers: no multi-second idle back-off."""
    multi = settings.model_copy(update={"queues": ("a", "b", "c"), "fetch_idle_max_interval": 3.0})
    async with Client(multi) as client, Worker(multi, jobs=ALL):
        await asyncio.sleep(0.2)  # let every processor go idle and block
        for i in range(5):
            started = time.monotonic()
            await client.enqueue(add.options(queue="c"), i, 0)
            await wait_for(lambda n=i + 1: _count("add", n), timeout=5)
            assert time.monotonic() - started < 1.0


async def test_script_flush_mid_run(settings: Settings, redis: Redis) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        await client.enqueue_many(add, [(i, 0) for i in range(100)])
        await wait_for(lambda: _count("add", 100))
        await redis.script_flush()
        await client.enqueue_many(add, [(i, 0) for i in range(100)])
        await client.enqueue(add, 1, 1)
        await wait_for(lambda: _count("add", 201))


async def test_non_json_argument_is_a_type_error(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        with pytest.raises(TypeError, match="argument 1"):
            await client.enqueue(add, 1, {1, 2})
        with pytest.raises(TypeError, match="keyword argument 'b'"):
            await client.enqueue(add, 1, b=object())
        # One bad item fails the whole batch before anything is sent.
        with pytest.raises(TypeError, match="argument 1"):
            await client.enqueue_many(add, [(1, 2), (3, {4})])
        with pytest.raises(TypeError, match="keyword argument 'b'"):
            await client.enqueue_many(add, [{"a": 1, "b": 2}, {"a": 1, "b": object()}])
    assert await redis.exists(keys.queue("default")) == 0


async def test_two_workers_in_one_process_share_nothing(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(add, [(i, 0) for i in range(200)])
    first, second = Worker(settings, jobs=ALL), Worker(settings, jobs=ALL)
    assert first.identity != second.identity
    async with first, second:
        await wait_for(lambda: _count("add", 200))
    assert len([k for k, _ in seen if k == "add"]) == 200
    assert await redis.scard(keys.processes) == 0


async def test_heartbeat_keys_while_running(settings: Settings, redis: Redis, keys: Keys) -> None:
    worker = Worker(settings, jobs=ALL)
    async with worker:
        info = orjson.loads(await redis.get(keys.process(worker.identity)))
        assert info["concurrency"] == settings.concurrency
        assert {"hostname", "pid", "queues", "started_at", "busy", "version"} <= set(info)
        ttl = await redis.pttl(keys.process(worker.identity))
        assert 0 < ttl <= settings.heartbeat_ttl * 1000
        assert await redis.sismember(keys.in_progress_identities, worker.identity)
        assert await redis.sismember(keys.processes, worker.identity)
        assert await redis.hget(keys.last_beat, worker.identity) is not None
        assert await redis.zscore(keys.live_queues, "default") is not None
    assert await redis.exists(keys.process(worker.identity)) == 0
    assert not await redis.sismember(keys.processes, worker.identity)


async def test_basic_fetch_runs_jobs_without_an_in_progress_list(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    basic = settings.model_copy(update={"fetch": "basic", "queues": ("a", "b")})
    async with Client(basic) as client:
        await client.enqueue_many(add.options(queue="a"), [(i, 0) for i in range(30)])
        await client.enqueue_many(add.options(queue="b"), [(i, 0) for i in range(30)])
    worker = Worker(basic, jobs=ALL)
    async with worker:
        await wait_for(lambda: _count("add", 60))
        assert await redis.exists(keys.in_progress(worker.identity)) == 0
        assert not await redis.sismember(keys.in_progress_identities, worker.identity)
    assert int(await redis.get(keys.stats_processed)) == 60
    assert "may have run twice" not in caplog.text  # no list to find them on: no false alarm


async def test_basic_fetch_files_failures_in_retry_and_dead(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    """No in-progress list to look for the job on: its failure is filed all the same
    (retried, then dead; a retry=False job discarded), never taken for a duplicate."""
    basic = settings.model_copy(update={"fetch": "basic"})
    async with Client(basic) as client:
        failing = await client.enqueue(boom.options(retry=1))
        await client.enqueue(discard)
    assert failing is not None
    async with Worker(basic, jobs=ALL):
        await wait_for(lambda: _zcard(redis, keys.retry, 1))
        [entry] = await redis.zrange(keys.retry, 0, -1)
        await redis.zadd(keys.retry, {entry: 0})  # due now, not in 15+ seconds
        await wait_for(lambda: _zcard(redis, keys.dead, 1))
        await wait_for(lambda: _stat(redis, keys.stats_failed, 3))
    [entry] = await redis.zrange(keys.dead, 0, -1)
    dead = orjson.loads(entry)
    assert dead["jid"] == failing.jid
    assert dead["error_class"] == "ValueError"
    assert await redis.zcard(keys.retry) == 0
    assert "may have run twice" not in caplog.text
    assert not await redis.get(keys.stat("duplicates_suspected"))


async def test_concurrent_enqueues_are_coalesced_and_each_returns_its_jid(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        jids = await asyncio.gather(
            *[client.enqueue(add.options(queue=q), i, 0) for i in range(600) for q in ("a", "b")]
        )
    assert len(set(jids)) == 1200
    queued = [
        orjson.loads(j)["jid"] for q in ("a", "b") for j in await redis.lrange(keys.queue(q), 0, -1)
    ]
    assert sorted(queued) == sorted(jids)


async def test_a_failed_coalesced_push_raises_in_every_caller(settings: Settings) -> None:
    down = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    async with Client(down) as client:
        results = await asyncio.gather(
            *[client.enqueue(add, i, 0) for i in range(5)], return_exceptions=True
        )
    assert all(isinstance(r, ConnectionError) for r in results), results


HELD: dict[str, asyncio.Event] = {}


@job(name="e2e.hold")
async def hold(i: int) -> None:
    await HELD["release"].wait()


@job(name="e2e.quick")
async def quick(i: int) -> None:
    return None


@pytest.mark.parametrize("prefetch", [0, 3])
async def test_prefetch_bounds_what_a_worker_holds(
    settings: Settings, redis: Redis, keys: Keys, prefetch: int
) -> None:
    """Held beyond the running jobs: exactly ``prefetch`` (none for 0), even after quick ones."""
    HELD["release"] = asyncio.Event()
    # Held jobs kept (by default they go back within ~100 ms: test_fair_dispatch.py).
    settings = settings.model_copy(
        update={"concurrency": 4, "prefetch": prefetch, "give_back_held_after": 600.0}
    )
    async with Client(settings) as client:
        # Quick jobs first: the fetcher learns they are quick (and would fetch
        # a batch ahead of them), then jobs that wait.
        await client.enqueue_many(quick, [(i,) for i in range(50)])
        await client.enqueue_many(hold, [(i,) for i in range(20)])
    worker = Worker(settings, jobs=[hold, quick])
    async with worker:
        listed = keys.in_progress(worker.identity)
        processors = worker.processors
        assert processors is not None

        async def all_running() -> bool:
            return len(processors.running) == 4

        await wait_for(all_running)

        async def settled() -> bool:
            return await redis.llen(listed) == 4 + prefetch

        await wait_for(settled)
        for _ in range(5):  # and it stays so
            await asyncio.sleep(0.05)
            assert await redis.llen(listed) == 4 + prefetch

        async def the_rest_queued() -> bool:
            # Jobs fetched ahead and given back may come back behind jobs that
            # wait (fetch calls out together can run in either order), so not
            # every quick job has run: but every job is run, held or queued.
            done = int(await redis.get(keys.stats_processed) or 0)
            return done + 4 + prefetch + await redis.llen(keys.queue("default")) == 70

        await wait_for(the_rest_queued)
        HELD["release"].set()
        await wait_for(lambda: _stat(redis, keys.stats_processed, 70))
