"""The running lock of an overlap=False periodic entry on every path that moves its
job: re-taken by recovery and give-back (inside requeue_job), released by the ack,
the terminal filing, the ProcessDied burial, an unsettled failure filed into dead,
and an operator's delete or clear; kept (with the retry's delay) by a retry. Every
change owner-checked: another run's lock is never touched."""

from __future__ import annotations

import time

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import api
from cogworker_async.holds import PERIODIC_RUNNING, Hold
from cogworker_async.keys import Keys
from cogworker_async.periodic import every
from cogworker_async.periodic.ticker import publish
from cogworker_async.store import admin, commands, orphans
from cogworker_async.store.commands import Ack, Filing
from tests.lua.support import jid_of, kill_from_retry, make_job

pytestmark = pytest.mark.anyio

ME = "host:1:me"
DEAD = "host:2:dead"


def periodic_job(queued_ttl: float = 120.0, **extra: object) -> bytes:
    return make_job(
        "default",
        periodic_pjid="sync",
        periodic_slot=60.0,
        periodic_until_executed=True,
        periodic_queued_ttl=queued_ttl,
        periodic_active_ttl=600.0,
        **extra,
    )


def lock(keys: Keys) -> str:
    return keys.periodic_running("sync")


async def holder(redis: Redis, keys: Keys) -> bytes | None:
    value = await redis.get(lock(keys))
    assert value is None or isinstance(value, bytes)
    return value


async def test_shutdown_requeue_retakes_a_free_lock_with_the_queued_ttl(
    redis: Redis, keys: Keys
) -> None:
    raw = periodic_job(queued_ttl=120)
    await redis.lpush(keys.in_progress(ME), raw, make_job())
    result = await orphans.requeue(
        redis,
        keys,
        identity=ME,
        threshold=None,
        default_queue="default",
        max_orphanings=3,
        live_window=60,
    )
    assert result.moved == 2
    assert await holder(redis, keys) == jid_of(raw).encode()
    assert 110_000 < await redis.pttl(lock(keys)) <= 120_000


async def test_recovery_retakes_its_own_lock_and_leaves_another_runs(
    redis: Redis, keys: Keys
) -> None:
    # Recovery of a dead process's list: the owner's presence key is gone, its
    # last beat long past, and the judge (ME) has beaten for long enough.
    now = time.time()
    raw = periodic_job()
    await redis.lpush(keys.in_progress(DEAD), raw)
    await redis.hset(keys.last_beat, mapping={DEAD: now - 1000, ME: now})  # type: ignore[misc]
    await redis.hset(keys.beating_since, ME, now - 1000)  # type: ignore[misc]
    await redis.set(lock(keys), jid_of(raw), px=5)  # about to expire: re-taken longer
    result = await orphans.requeue(
        redis,
        keys,
        identity=DEAD,
        threshold=40,
        default_queue="default",
        max_orphanings=3,
        live_window=60,
        judge=ME,
        judge_ttl=20,
    )
    assert result.moved == 1
    assert await holder(redis, keys) == jid_of(raw).encode()
    assert await redis.pttl(lock(keys)) > 100_000

    # A newer run holds it: a requeue of an old one leaves it alone.
    other = periodic_job()
    await redis.set(lock(keys), "newer")
    await redis.lpush(keys.in_progress(ME), other)
    await orphans.requeue(
        redis,
        keys,
        identity=ME,
        threshold=None,
        default_queue="default",
        max_orphanings=3,
        live_window=60,
    )
    assert await holder(redis, keys) == b"newer"


async def test_give_back_retakes_the_lock(redis: Redis, keys: Keys) -> None:
    raw = periodic_job()
    await redis.lpush(keys.in_progress(ME), raw)
    result = await commands.give_back(redis, keys, identity=ME, jobs=[raw], default_queue="default")
    assert result.given == 1
    assert await holder(redis, keys) == jid_of(raw).encode()


async def test_ack_releases_only_its_own_lock(redis: Redis, keys: Keys) -> None:
    raw, plain = periodic_job(), make_job()
    await redis.lpush(keys.in_progress(ME), raw, plain)
    await redis.set(lock(keys), jid_of(raw))
    acks = [Ack(raw, jid_of(raw), holds=_held(keys, raw)), Ack(plain, jid_of(plain))]
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == []
    assert await holder(redis, keys) is None
    assert await redis.llen(keys.in_progress(ME)) == 0  # type: ignore[misc]

    second = periodic_job()
    await redis.lpush(keys.in_progress(ME), second)
    await redis.set(lock(keys), "newer")
    await commands.ack(
        redis, keys, identity=ME, acks=[Ack(second, jid_of(second), holds=_held(keys, second))]
    )
    assert await holder(redis, keys) == b"newer"


async def test_fetch_acks_release_with_the_fetch(redis: Redis, keys: Keys) -> None:
    raw = periodic_job()
    await redis.lpush(keys.in_progress(ME), raw)
    await redis.set(lock(keys), jid_of(raw))
    queued = make_job()
    await redis.lpush(keys.queue("default"), queued)
    result = await commands.fetch(
        redis,
        keys,
        identity=ME,
        queues=["default"],
        want=5,
        acks=[Ack(raw, jid_of(raw), holds=_held(keys, raw))],
        reliable=True,
    )
    assert result.jobs == [queued]  # the queue names still line up after the block
    assert await holder(redis, keys) is None


def _held(keys: Keys, raw: bytes, ttl: float | None = None) -> tuple[Hold, ...]:
    return (Hold(PERIODIC_RUNNING.name, lock(keys), jid_of(raw), ttl),)


def filing(keys: Keys, raw: bytes, target: str | None, ttl: float | None) -> Filing:
    return Filing(raw, jid_of(raw), target, time.time(), raw, holds=_held(keys, raw, ttl))


@pytest.mark.parametrize("where", ["dead", "discard", "retry"])
async def test_filing_releases_on_terminal_failure_and_keeps_for_a_retry(
    redis: Redis, keys: Keys, where: str
) -> None:
    raw = periodic_job()
    await redis.lpush(keys.in_progress(ME), raw)
    await redis.set(lock(keys), jid_of(raw), px=1000)
    target = {"dead": keys.dead, "discard": None, "retry": keys.retry}[where]
    ttl = 500.0 if where == "retry" else None
    filed = await commands.file(
        redis,
        keys,
        identity=ME,
        filing=filing(keys, raw, target, ttl),
        dead_max_jobs=100,
        dead_timeout=3600,
    )
    assert filed
    if where == "retry":
        assert await holder(redis, keys) == jid_of(raw).encode()
        assert await redis.pttl(lock(keys)) > 400_000
    else:
        assert await holder(redis, keys) is None


async def test_process_died_burial_releases_the_lock(redis: Redis, keys: Keys) -> None:
    raw = periodic_job()
    await redis.rpush(keys.repeat_orphans, raw)  # type: ignore[misc]
    await redis.set(lock(keys), jid_of(raw))
    entry = orjson.dumps({**orjson.loads(raw), "error_class": "ProcessDied"})
    assert await orphans.bury_orphan(redis, keys, raw=raw, jid=jid_of(raw), dead_entry=entry)
    assert await holder(redis, keys) is None


@pytest.mark.parametrize("into_dead", [True, False])
async def test_unsettled_filing_into_dead_releases_the_lock(
    redis: Redis, keys: Keys, into_dead: bool
) -> None:
    raw = periodic_job()
    await redis.set(lock(keys), jid_of(raw))
    record = b'{"record": 1}'
    await redis.rpush(keys.unsettled, record)  # type: ignore[misc]
    target = keys.dead if into_dead else keys.retry
    assert await commands.file_unsettled(
        redis, keys, record=record, target=target, jid=jid_of(raw), score=1.0, entry=raw
    )
    assert (await holder(redis, keys) is None) is into_dead


async def test_finished_job_dropped_by_the_requeue_releases_its_lock(
    redis: Redis, keys: Keys
) -> None:
    raw = periodic_job()
    await redis.lpush(keys.in_progress(ME), raw)
    await redis.set(lock(keys), jid_of(raw))
    await orphans.requeue(
        redis,
        keys,
        identity=ME,
        threshold=None,
        default_queue="default",
        max_orphanings=3,
        live_window=60,
        finished=[raw],
    )
    assert await redis.llen(keys.queue("default")) == 0  # type: ignore[misc]
    assert await holder(redis, keys) is None


@pytest.mark.parametrize("how", ["delete", "delete_all", "clear"])
async def test_operator_removal_releases_the_lock(redis: Redis, keys: Keys, how: str) -> None:
    raw = periodic_job()
    await redis.set(lock(keys), jid_of(raw))
    if how == "clear":
        await redis.lpush(keys.queue("default"), raw, make_job())
        await redis.sadd(keys.queues, "default")  # type: ignore[misc]
        assert await api.clear_queue(redis, keys, "default") == 2
    else:
        await redis.zadd(keys.retry, {raw: 1.0, make_job(): 2.0})
        if how == "delete":
            assert await api.delete(redis, keys, "retry", [jid_of(raw)]) == 1
        else:
            assert await api.delete_all(redis, keys, "retry") == 2
    assert await holder(redis, keys) is None


async def test_operator_removal_leaves_another_runs_lock(redis: Redis, keys: Keys) -> None:
    raw = periodic_job()
    await redis.set(lock(keys), "newer")
    await redis.zadd(keys.dead, {raw: 1.0})
    assert await api.delete_all(redis, keys, "dead") == 1
    assert await holder(redis, keys) == b"newer"


async def test_run_now_of_an_overlap_false_entry_takes_a_free_lock(
    redis: Redis, keys: Keys
) -> None:
    entry = every(60, "x.job", name="sync", overlap=False, queued_ttl=50)
    await publish(redis, keys, [entry], 0.0)
    seconds, _ = await redis.time()
    await redis.zadd(keys.live_queues, {"default": float(seconds)})  # a live process reads it
    jid = await api.run_periodic_now(redis, keys, "sync")
    assert jid is not None
    assert await holder(redis, keys) == jid.encode()
    assert 0 < await redis.pttl(lock(keys)) <= 50_000
    (queued,) = [orjson.loads(r) for r in await redis.lrange(keys.queue("default"), 0, -1)]  # type: ignore[misc]
    assert (queued["jid"], queued["periodic_until_executed"]) == (jid, True)
    # Held by that run: a second run-now goes ahead without touching it.
    again = await api.run_periodic_now(redis, keys, "sync")
    assert again not in (None, jid)
    assert await holder(redis, keys) == jid.encode()
    assert await api.run_periodic_now(redis, keys, "nope") is None
    (info,) = await api.periodic_entries(redis, keys)
    assert (info.name, info.overlap, info.running) == ("sync", False, jid)


async def test_an_operator_kill_releases_the_lock(redis: Redis, keys: Keys) -> None:
    raw = periodic_job()
    await redis.set(lock(keys), jid_of(raw))
    assert await kill_from_retry(redis, keys, raw)
    assert await holder(redis, keys) is None


async def test_ack_with_the_metrics_history_on_still_releases(redis: Redis, keys: Keys) -> None:
    raw = periodic_job()
    await redis.lpush(keys.in_progress(ME), raw)
    await redis.set(lock(keys), jid_of(raw))
    now = time.time()
    acks = [Ack(raw, jid_of(raw), run=("tests.job", now - 1, now), holds=_held(keys, raw))]
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == []
    assert await holder(redis, keys) is None
    assert await redis.llen(keys.in_progress(ME)) == 0  # type: ignore[misc]


async def test_an_operator_retry_retakes_a_free_lock_and_leaves_a_newer_runs(
    redis: Redis, keys: Keys
) -> None:
    """A dead run an operator retries waits on its queue holding the running
    lock again (no slot starts beside it); a lock a newer run holds stays."""
    for holder_now, expected in ((None, "self"), ("a-newer-run", "a-newer-run")):
        raw = periodic_job(queued_ttl=90.0)
        if holder_now is not None:
            await redis.set(lock(keys), holder_now)
        await redis.zadd(keys.dead, {raw: 1.0})
        moved = await admin.enqueue_entry(
            redis, keys, source=keys.dead, entry=raw, payload=raw, queue="default"
        )
        assert moved
        want = jid_of(raw) if expected == "self" else expected
        assert await holder(redis, keys) == want.encode()
        if expected == "self":
            assert 80_000 < await redis.pttl(lock(keys)) <= 90_000  # the queued TTL
        await redis.delete(lock(keys), keys.queue("default"))
