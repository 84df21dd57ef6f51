"""Failure paths that lose nothing and never re-run a finished job (real Redis, real faults)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterator

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, api, job
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.middleware import JobDict, Next
from cogworker_async.store.commands import Filing
from cogworker_async.worker import suspects
from cogworker_async.worker.settlement import Settler
from cogworker_async.worker.unsettled import file_unsettled
from tests.faultproxy import FaultProxy
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

runs: list[str] = []
proxy_box: dict[str, FaultProxy] = {}


@job(name="fp.ok")
async def ok_job(tag: str) -> None:
    runs.append(tag)


@job(name="fp.boom", retry=3)
async def boom_job(tag: str) -> None:
    runs.append(tag)
    raise ValueError("boom")


@job(name="fp.finish_then_cut")
async def finish_then_cut(tag: str) -> None:
    """Finishes, then Redis vanishes before the ack can be sent."""
    runs.append(tag)
    proxy_box["proxy"].refuse(True)


@job(name="fp.fail_then_cut", retry=3)
async def fail_then_cut(tag: str) -> None:
    runs.append(tag)
    proxy_box["proxy"].refuse(True)
    raise ValueError("failed while Redis went away")


def _dead_or_alive(count: int, exc: BaseException, job: JobDict) -> float | str | None:
    return job["args"][0]


@job(name="fp.decides", retry=5, retry_in=_dead_or_alive)
async def decides(decision: object) -> None:
    raise RuntimeError(f"decision {decision}")


ALL = [ok_job, boom_job, finish_then_cut, fail_then_cut, decides]


@pytest.fixture(autouse=True)
def _clear() -> None:
    runs.clear()


@pytest.fixture
def proxy(redis_server: EmbeddedRedis) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", redis_server.port or 0) as fault_proxy:
        proxy_box["proxy"] = fault_proxy
        yield fault_proxy


@pytest.fixture
def proxied(settings: Settings, proxy: FaultProxy) -> Settings:
    return settings.model_copy(update={"redis_url": proxy.url})


async def in_progress_empty(redis: Redis, keys: Keys, worker: Worker) -> bool:
    return await redis.llen(keys.in_progress(worker.identity)) == 0


async def test_ack_lost_with_the_connection_lands_later_and_never_reruns(
    proxied: Settings, proxy: FaultProxy, redis: Redis, keys: Keys
) -> None:
    async with Client(proxied) as client:
        await client.enqueue(finish_then_cut, "once")
    worker = Worker(proxied, jobs=ALL)
    async with worker:
        await wait_for(lambda: _ran(1))
        assert await redis.llen(keys.in_progress(worker.identity)) == 1  # ack pending
        proxy.heal()
        await wait_for(lambda: in_progress_empty(redis, keys, worker))
        assert await redis.llen(keys.queue("default")) == 0
    assert runs == ["once"]
    assert int(await redis.get(keys.stats_processed)) == 1


async def _ran(n: int) -> bool:
    return len(runs) >= n


# heartbeat_ttl + 2 x heartbeat_interval + 0.5 s: the least orphan_threshold allowed.
_LONG_PRESENCE = {"heartbeat_ttl": 20.0, "orphan_threshold": 21.5}


async def test_filing_lost_with_the_connection_lands_later(
    proxied: Settings, proxy: FaultProxy, redis: Redis, keys: Keys
) -> None:
    # The cut lasts from the handler's failure until the test sees the filing
    # pending: on a loaded machine it outlasted the 2 s heartbeat TTL and the
    # worker's own identity went overdue mid-test. The filing is what is tested
    # here, not liveness: a TTL no cut reaches keeps the heartbeat out of it.
    proxied = proxied.model_copy(update=_LONG_PRESENCE)
    async with Client(proxied) as client:
        jid = await client.enqueue(fail_then_cut, "once")
    worker = Worker(proxied, jobs=ALL)
    async with worker:
        await wait_for(lambda: _ran(1), timeout=30)
        await wait_for(lambda: _pending_failures(worker, 1), timeout=30)
        proxy.heal()
        await wait_for(lambda: _zcard(redis, keys.retry, 1), timeout=30)
        # The filing lands in Redis before the worker reads its reply and drops
        # it from pending: on a busy machine the test can see the first without
        # the second, so the drop is awaited, not asserted at once.
        await wait_for(lambda: _no_pending_failures(worker), timeout=30)
    assert runs == ["once"]
    entry = orjson.loads((await redis.zrange(keys.retry, 0, -1))[0])
    assert entry["jid"] == jid
    assert entry["error_class"] == "ValueError"


async def _pending_failures(worker: Worker, n: int) -> bool:
    return worker.settler is not None and len(worker.settler.pending) >= n


async def _no_pending_failures(worker: Worker) -> bool:
    return worker.settler is not None and not worker.settler.pending


async def _zcard(redis: Redis, key: str, n: int) -> bool:
    return await redis.zcard(key) >= n


async def test_shutdown_with_a_pending_failure_loses_nothing_reruns_nothing(
    proxied: Settings, proxy: FaultProxy, redis: Redis, keys: Keys
) -> None:
    async with Client(proxied) as client:
        await client.enqueue(fail_then_cut, "once")
    worker = Worker(proxied, jobs=ALL)
    async with worker:
        await wait_for(lambda: _pending_failures(worker, 1))
        proxy.heal()
        worker.stop()
    # Filed (by reconcile, or handed over to unsettled at shutdown), never requeued.
    assert await redis.llen(keys.queue("default")) == 0
    assert await redis.llen(keys.in_progress(worker.identity)) == 0
    handed = await redis.lrange(keys.unsettled, 0, -1)
    if handed:
        assert await file_unsettled(redis, keys, logging.getLogger("test")) == 1
    assert await redis.zcard(keys.retry) == 1
    assert runs == ["once"]


async def test_pending_failures_are_handed_over_then_filed_by_anyone(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    identity = "gone:1:abc"
    raw = orjson.dumps({"jid": "f" * 24, "class": "x", "args": [], "queue": "default"})
    await redis.lpush(keys.in_progress(identity), raw)
    settler = Settler(
        redis,
        keys,
        settings,
        identity=identity,
        logger=logging.getLogger("t"),
        rng=random.Random(1),
    )
    entry = orjson.dumps({"jid": "f" * 24, "error_class": "ValueError"})
    settler.pending[raw] = Filing(raw, "f" * 24, keys.retry, 123.0, entry)
    discard_raw = orjson.dumps({"jid": "e" * 24, "class": "x", "args": [], "queue": "default"})
    settler.pending[discard_raw] = Filing(discard_raw, "e" * 24, None, 1.0, b"")
    finished, keep = await settler.hand_over_pending()
    assert finished == [discard_raw]
    assert keep == []
    assert await redis.llen(keys.in_progress(identity)) == 0
    assert await redis.llen(keys.unsettled) == 1
    assert await file_unsettled(redis, keys, logging.getLogger("t")) == 1
    assert await redis.zrange(keys.retry, 0, -1, withscores=True) == [(entry, 123.0)]


async def test_hand_over_that_fails_keeps_the_job_on_the_list(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    identity = "gone:2:abc"
    raw = orjson.dumps({"jid": "d" * 24, "class": "x", "args": [], "queue": "default"})
    await redis.lpush(keys.in_progress(identity), raw)
    dead_client = Redis.from_url("redis://127.0.0.1:1/0")
    settler = Settler(
        dead_client,
        keys,
        settings,
        identity=identity,
        logger=logging.getLogger("t"),
        rng=random.Random(1),
    )
    settler.pending[raw] = Filing(raw, "d" * 24, keys.dead, 1.0, b"{}")
    finished, keep = await settler.hand_over_pending()
    await dead_client.aclose()
    assert (finished, keep) == ([], [raw])
    assert await redis.lrange(keys.in_progress(identity), 0, -1) == [raw]


async def test_corrupt_unsettled_record_is_quarantined_while_good_ones_file(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    good = orjson.dumps({"set": "dead", "score": 5.0, "payload": '{"jid":"a"}', "jid": "a"})
    await redis.rpush(keys.unsettled, b"{broken", good, orjson.dumps({"set": "elsewhere"}))
    async with Worker(settings, jobs=ALL):
        await wait_for(lambda: _zcard(redis, keys.dead, 1), timeout=15)
        await wait_for(lambda: _llen_is(redis, keys.unsettled, 0), timeout=15)
    quarantined = await redis.lrange(keys.quarantine(f"{keys.unsettled}:records"), 0, -1)
    assert quarantined == [b"{broken", orjson.dumps({"set": "elsewhere"})]
    assert await redis.ttl(keys.quarantine(f"{keys.unsettled}:records")) > 0
    assert "unusable" in caplog.text


async def _llen_is(redis: Redis, key: str, n: int) -> bool:
    return await redis.llen(key) == n


async def test_scheduler_defers_an_entry_it_cannot_push_while_others_move(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    await redis.set(keys.queue("broken"), "not a list")
    async with Client(settings) as client:
        await client.enqueue(ok_job.options(queue="broken", delay=0.01), "never")
        await client.enqueue(ok_job.options(delay=0.01), "moved")
    started = time.time()
    async with Worker(settings, jobs=ALL):
        await wait_for(lambda: _ran(1))
    assert runs == ["moved"]
    ((entry, score),) = await redis.zrange(keys.schedule, 0, -1, withscores=True)
    assert orjson.loads(entry)["queue"] == "broken"
    assert score > started + 30  # deferred, not retried first on every poll
    assert "deferred" in caplog.text


async def test_strays_on_own_list_are_requeued_after_two_looks(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    worker = Worker(settings, jobs=ALL)
    async with worker:
        stray = orjson.dumps(
            {
                "jid": "5" * 24,
                "class": "fp.ok",
                "args": ["stray"],
                "queue": "default",
                "created_at": time.time(),
                "enqueued_at": time.time(),
            }
        )
        await redis.lpush(keys.in_progress(worker.identity), stray)
        await wait_for(lambda: _ran(1), timeout=15)
        assert worker.reconciler is not None
        assert worker.reconciler.strays_requeued == 1
    assert runs == ["stray"]
    assert "requeued stray" in caplog.text


@pytest.mark.parametrize(
    ("decision", "where"), [(0.0, "retry-now"), ("dead", "dead"), ("discard", "nowhere")]
)
async def test_retry_in_hook_decides(
    settings: Settings, redis: Redis, keys: Keys, decision: object, where: str
) -> None:
    async with Client(settings) as client:
        await client.enqueue(decides, decision)
    async with Worker(settings, jobs=ALL):
        await wait_for(lambda: _stat_at_least(redis, keys.stats_failed, 1))
    retry = await redis.zrange(keys.retry, 0, -1, withscores=True)
    dead = await redis.zcard(keys.dead)
    if where == "dead":
        assert (len(retry), dead) == (0, 1)
    elif where == "nowhere":
        assert (len(retry), dead) == (0, 0)
    else:
        # Retried at once: it may already be back and failed again, never dead.
        assert dead == 0


async def _stat_at_least(redis: Redis, key: str, n: int) -> bool:
    return int(await redis.get(key) or 0) >= n


async def _noop_ack_matrix_middleware(job: JobDict, call_next: Next) -> None:
    if job["args"][0] == "before":
        raise RuntimeError("middleware before")
    await call_next()
    if job["args"][0] == "after":
        raise RuntimeError("middleware after")


@pytest.mark.parametrize(
    ("name", "arg", "outcome"),
    [
        ("fp.ok", "x", "acked"),
        ("fp.boom", "x", "retry:ValueError"),
        ("fp.nobody", "x", "dead:UnknownJob"),
        ("fp.ok", "before", "retry:RuntimeError"),
        ("fp.ok", "after", "retry:RuntimeError"),
    ],
)
async def test_acknowledgement_matrix(
    settings: Settings, redis: Redis, keys: Keys, name: str, arg: str, outcome: str
) -> None:
    async with Client(settings) as client:
        await client.enqueue(name, arg)
    worker = Worker(settings, jobs=ALL, middleware=[_noop_ack_matrix_middleware])
    async with worker:
        await wait_for(lambda: _stat_at_least(redis, keys.stats_processed, 1))
        await wait_for(lambda: in_progress_empty(redis, keys, worker))
    retry = [orjson.loads(e) for e in await redis.zrange(keys.retry, 0, -1)]
    dead = [orjson.loads(e) for e in await redis.zrange(keys.dead, 0, -1)]
    if outcome == "acked":
        assert retry == dead == []
        assert int(await redis.get(keys.stats_failed) or 0) == 0
    else:
        where, error_class = outcome.split(":")
        assert [e["error_class"] for e in {"retry": retry, "dead": dead}[where]] == [error_class]
        assert {"retry": dead, "dead": retry}[where] == []


active: dict[str, int] = {"now": 0, "overlaps": 0, "suspect": 0}


@job(name="fp.tracked")
async def tracked(tag: str) -> None:
    active["now"] += 1
    try:
        if tag == "suspect":
            active["suspect"] = 1
            if active["now"] > 1:
                active["overlaps"] += 1
            await asyncio.sleep(0.2)
            active["suspect"] = 0
        else:
            if active["suspect"]:
                active["overlaps"] += 1
            await asyncio.sleep(0.02)
        runs.append(tag)
    finally:
        active["now"] -= 1


async def test_a_recovered_job_runs_alone(settings: Settings, redis: Redis, keys: Keys) -> None:
    active.update(now=0, overlaps=0, suspect=0)
    async with Client(settings) as client:
        await client.enqueue_many(tracked, [("normal",) for _ in range(20)])
        await client.enqueue(tracked, "suspect")
        await client.enqueue_many(tracked, [("normal",) for _ in range(20)])
    # Make the middle job look recovered from a dead process, orphaned twice,
    # as requeue.lua marks it (the mark counts beside its orphan counter).
    queued = await redis.lrange(keys.queue("default"), 0, -1)
    index = next(i for i, raw in enumerate(queued) if b'"suspect"]' in raw)
    await redis.lset(keys.queue("default"), index, b'{"suspect":1,' + queued[index][1:])
    await redis.set(keys.orphanings(orjson.loads(queued[index])["jid"]), 2)
    async with Worker(settings.model_copy(update={"concurrency": 10}), jobs=[tracked]):
        await wait_for(lambda: _ran(41), timeout=20)
    assert active["overlaps"] == 0  # nothing else ran beside it


async def test_a_forged_suspect_mark_runs_beside_other_jobs(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    """A producer's own `"suspect":1` (no orphan counter behind it) isolates nothing."""
    active.update(now=0, overlaps=0, suspect=0)
    async with Client(settings) as client:
        await client.enqueue(tracked, "suspect")
        await client.enqueue_many(tracked, [("normal",) for _ in range(20)])
    queued = await redis.lrange(keys.queue("default"), 0, -1)
    index = next(i for i, raw in enumerate(queued) if b'"suspect"]' in raw)
    await redis.lset(keys.queue("default"), index, b'{"suspect":1,' + queued[index][1:])
    async with Worker(settings.model_copy(update={"concurrency": 10}), jobs=[tracked]):
        await wait_for(lambda: _ran(21), timeout=20)
    assert active["overlaps"] > 0  # it ran beside the others (on bc90d0c: alone)


@job(name="fp.hold")
async def hold(seconds: float) -> None:
    await asyncio.sleep(seconds)
    runs.append("held")


async def test_a_suspect_waits_for_the_process_only_so_long(
    settings: Settings, redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy process gives a suspect back after RUN_ALONE_WAIT and serves other queues.

    Strict order puts the suspect's queue first: on bc90d0c the process took
    it and fetched nothing more until its long job ended.
    """
    monkeypatch.setattr(suspects, "RUN_ALONE_WAIT", 0.3)
    active.update(now=0, overlaps=0, suspect=0)
    settings = settings.model_copy(
        update={"queues": ("default", "other"), "strict_order": True, "concurrency": 3}
    )
    async with Client(settings) as client:
        await client.enqueue(hold, 3.0)
        async with Worker(settings, jobs=[hold, tracked]) as worker:
            await wait_for(lambda: _llen_is(redis, keys.in_progress(worker.identity), 1))
            # As requeue.lua leaves a job orphaned twice: counted, then marked.
            jid = "5" * 24
            await redis.set(keys.orphanings(jid), 2)
            body = {"jid": jid, "class": "fp.tracked", "args": ["suspect"], "queue": "default"}
            await redis.lpush(keys.queue("default"), b'{"suspect":1,' + orjson.dumps(body)[1:])
            await redis.zadd(keys.wakeup("default"), {"1": 0})
            await client.enqueue_many(
                tracked.options(queue="other"), [("other",) for _ in range(5)]
            )
            await wait_for(lambda: _ran(5), timeout=10)
            assert runs == ["other"] * 5  # all while the long job still ran
            await wait_for(lambda: _ran(7), timeout=10)
    assert runs[5:] == ["held", "suspect"]  # then the suspect, alone
    assert active["overlaps"] == 0
    assert await redis.exists(keys.orphanings(jid)) == 0  # it finished: counter cleared


@job(name="fp.slowish")
async def slowish(tag: str) -> None:
    await asyncio.sleep(0.3)
    runs.append(tag)


async def test_a_job_recovered_while_running_here_is_reported_and_counted(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    async with Client(settings) as client:
        jid = await client.enqueue(slowish, "x")
    worker = Worker(settings, jobs=[slowish])
    async with worker:
        await wait_for(lambda: _llen_is(redis, keys.in_progress(worker.identity), 1))
        # As orphan recovery would: the job leaves this process's list mid-run.
        raw = (await redis.lrange(keys.in_progress(worker.identity), 0, -1))[0]
        await redis.lrem(keys.in_progress(worker.identity), 1, raw)
        await wait_for(lambda: _ran(1))
        await wait_for(lambda: _stat_at_least(redis, keys.stat("duplicates_suspected"), 1))
    assert f"jid={jid} recovered while still running here: it may have run twice" in caplog.text
    stats = await api.stats(redis, keys)
    assert stats.recovery["duplicates_suspected"] == 1
