"""No Redis reply takes a running worker down or stalls it (issue 11, item 3).

A key of ours made the wrong type while a worker runs (key_check_interval left
at its 300 s default) is moved aside at once by the key guard, woken by the
WRONGTYPE reply of whichever part met it; jobs keep flowing within seconds and
the log says so in a handful of lines, without a traceback. A filing Redis
refuses (NOPERM here) stays pending and lands once Redis accepts it again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

done: list[int] = []
failed: list[str] = []
gate: dict[str, anyio.Event] = {}  # "release": the event fails_when_released waits on


@job(name="replies.step")
async def step(i: int) -> None:
    done.append(i)


@job(name="replies.fails", retry=3)
async def fails_with_retries(tag: str) -> None:
    failed.append(tag)
    raise ValueError("goes to the retry set")


@job(name="replies.dies", retry=0)
async def fails_to_dead(tag: str) -> None:
    failed.append(tag)
    raise ValueError("goes to the dead set")


@job(name="replies.fails_later", retry=3)
async def fails_when_released(tag: str) -> None:
    failed.append(tag)
    await gate["release"].wait()
    raise ValueError("filed once Redis lets us")


@dataclass(frozen=True)
class Case:
    key: Callable[[Keys, str], str]
    queues: tuple[str, ...] = ("default",)
    # What, besides plain jobs, has to get through once the key is broken.
    fails_into: str | None = None  # "retry" or "dead": a failing job filed there
    scheduled: bool = False  # a scheduled job (the poller moves it)


CASES: dict[str, Case] = {
    "retry": Case(lambda k, _: k.retry, fails_into="retry"),
    "dead": Case(lambda k, _: k.dead, fails_into="dead"),
    "paused": Case(lambda k, _: k.paused),
    "own_in_progress": Case(lambda k, me: k.in_progress(me)),
    "only_queue": Case(lambda k, _: k.queue("default")),
    "one_of_two_queues": Case(lambda k, _: k.queue("other"), queues=("default", "other")),
    "wakeup": Case(lambda k, _: k.wakeup("default"), queues=("default", "other")),
    "processes": Case(lambda k, _: k.processes),
    "last_beat": Case(lambda k, _: k.last_beat),
    "live_queues": Case(lambda k, _: k.live_queues),
    "schedule": Case(lambda k, _: k.schedule, scheduled=True),
    "queues": Case(lambda k, _: k.queues, scheduled=True),
    "unsettled": Case(lambda k, _: k.unsettled),
}


def _count(n: int) -> Callable[[], object]:
    async def enough() -> bool:
        return len(set(done)) >= n

    return enough


async def _zcard_at_least(redis: Redis, key: str, n: int) -> bool:
    return await redis.type(key) == b"zset" and await redis.zcard(key) >= n


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(CASES))
async def test_a_wrong_typed_key_is_moved_aside_at_once_and_jobs_flow(
    name: str,
    settings: Settings,
    redis: Redis,
    keys: Keys,
    caplog: pytest.LogCaptureFixture,
) -> None:
    case = CASES[name]
    caplog.set_level(logging.INFO)
    done.clear()
    failed.clear()
    config = settings.model_copy(update={"queues": case.queues})
    assert config.key_check_interval == 300  # the default: only a WRONGTYPE can wake it
    worker = Worker(config, jobs=[step, fails_with_retries, fails_to_dead])
    key = case.key(keys, worker.identity)
    async with Client(config) as client, worker:
        await client.enqueue_many(step, [(i,) for i in range(5)])
        await wait_for(_count(5), timeout=10)
        # Idle: nothing of ours on the list (a SET would drop it), beating.
        await wait_for(lambda: _empty(redis, keys.in_progress(worker.identity)), timeout=5)
        await wait_for(lambda: _exists(redis, keys.process(worker.identity)), timeout=5)
        before = len(caplog.records)

        await redis.set(key, "garbage")
        if case.fails_into == "retry":
            await client.enqueue(fails_with_retries, "filed")
        elif case.fails_into == "dead":
            await client.enqueue(fails_to_dead, "filed")
        elif name == "queues":
            # Graduated by the poller: the only part of a worker writing the set.
            await client.enqueue(step.options(delay=0.05), 100)

        # Moved aside within a few seconds, not after key_check_interval.
        await wait_for(lambda: _quarantined(redis, keys, key), timeout=5)
        await client.enqueue_many(step, [(i,) for i in range(5, 25)])
        if case.scheduled:
            await client.enqueue(step.options(delay=0.05), 101)
        await wait_for(_count(25 + (2 if name == "queues" else 1 if case.scheduled else 0)))
        if case.fails_into is not None:
            target = keys.retry if case.fails_into == "retry" else keys.dead
            await wait_for(lambda: _zcard_at_least(redis, target, 1), timeout=10)
            assert failed == ["filed"]  # ran once: its filing was not lost nor rerun
        # The worker still beats and its duties still run.
        await wait_for(lambda: _exists(redis, keys.process(worker.identity)), timeout=5)
    # Leaving `async with` re-raises whatever ended the worker: it ran until stopped.
    assert sorted(set(done)) == sorted(
        set(range(25)) | ({100, 101} if name == "queues" else {101} if case.scheduled else set())
    )

    records = caplog.records[before:]
    about = [r for r in records if "WRONGTYPE" in r.getMessage() or key in r.getMessage()]
    assert 1 <= len(about) <= 5, [r.getMessage() for r in about]
    assert any("moved to" in r.getMessage() for r in about)
    assert [r.getMessage() for r in records if r.exc_info is not None] == []
    assert not any("please report" in r.getMessage() for r in records)
    assert len([r for r in records if r.levelno >= logging.WARNING]) <= 12


async def _empty(redis: Redis, key: str) -> bool:
    return int(await redis.llen(key)) == 0


async def _llen_is(redis: Redis, key: str, n: int) -> bool:
    return int(await redis.llen(key)) == n


async def _exists(redis: Redis, key: str) -> bool:
    return bool(await redis.exists(key))


async def _quarantined(redis: Redis, keys: Keys, key: str) -> bool:
    return await redis.type(keys.quarantine(key)) == b"string"


@pytest.mark.timeout(60)
async def test_a_filing_refused_by_noperm_stays_pending_and_lands_when_allowed(
    redis_server: EmbeddedRedis,
    settings: Settings,
    redis: Redis,
    keys: Keys,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A user that may not ZADD for a moment: the failure is kept, other jobs run, and it is
    filed in retry once ZADD is allowed again; the worker never stops."""
    release = gate["release"] = anyio.Event()
    done.clear()
    failed.clear()
    user, password = f"filer-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    await redis.acl_setuser(
        user,
        enabled=True,
        passwords=[f"+{password}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all"],
    )
    try:
        url = redis_server.url.replace("redis://", f"redis://{user}:{password}@", 1)
        config = settings.model_copy(update={"redis_url": url})
        async with (
            Client(settings) as client,
            Worker(config, jobs=[step, fails_when_released]) as worker,
        ):
            await client.enqueue(fails_when_released, "filed")
            await wait_for(lambda: _async(failed == ["filed"]), timeout=10)
            await redis.execute_command("ACL", "SETUSER", user, "-zadd")
            release.set()
            await wait_for(lambda: _async(bool(worker.settler and worker.settler.pending)))
            # Still ours: on the list, not in retry, while other jobs run.
            await client.enqueue_many(step, [(i,) for i in range(20)])
            await wait_for(_count(20), timeout=10)
            # Their acks go out batched, after the handlers return: the list comes
            # down to the one failure still pending, which stays on it.
            mine = keys.in_progress(worker.identity)
            await wait_for(lambda: _llen_is(redis, mine, 1), timeout=10)
            assert await redis.lrange(mine, 0, -1) == list(worker.settler.pending)
            assert not await redis.exists(keys.retry)
            await redis.execute_command("ACL", "SETUSER", user, "+zadd")
            await wait_for(lambda: _zcard_at_least(redis, keys.retry, 1), timeout=10)
            await wait_for(lambda: _empty(redis, keys.in_progress(worker.identity)))
            assert worker.settler is not None
            assert not worker.settler.pending
    finally:
        await redis.acl_deluser(user)
    assert failed == ["filed"]  # ran once
    (entry,) = await redis.zrange(keys.retry, 0, -1)
    assert b"filed once Redis lets us" in entry
    messages = [r.getMessage() for r in caplog.records]
    # Redis 7.0 says "ERR The user executing the script can't run this command", later ones
    # "NOPERM ...", Valkey 9 "ACL failure in script: ... has no permissions": either way
    # said once per part that met it, not once per try.
    refused = [
        m
        for m in messages
        if "can't run this command" in m or "NoPermission" in m or "no permissions" in m
    ]
    assert 1 <= len(refused) <= 3, refused
    assert [r.getMessage() for r in caplog.records if r.exc_info is not None] == []


async def _async(value: bool) -> bool:
    return value


@pytest.mark.timeout(60)
async def test_a_dead_process_wrong_typed_list_is_moved_aside_not_skipped_every_pass(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    """No live process guards a dead one's in-progress list: recovery moves it aside itself."""
    caplog.set_level(logging.INFO)
    gone = "gone-host:1:abcdef"
    await redis.sadd(keys.in_progress_identities, gone)
    await redis.set(keys.in_progress(gone), "garbage")
    async with Worker(settings, jobs=[step]):
        await wait_for(lambda: _quarantined(redis, keys, keys.in_progress(gone)), timeout=15)
        # The next pass finds the list gone (nothing to recover) and forgets the identity.
        await wait_for(lambda: _not_member(redis, keys.in_progress_identities, gone), timeout=10)
    messages = [r.getMessage() for r in caplog.records]
    assert [m for m in messages if "orphan recovery skipped" in m] == []
    assert len([m for m in messages if keys.in_progress(gone) in m]) == 1  # the move, once


async def _not_member(redis: Redis, key: str, member: str) -> bool:
    return not await redis.sismember(key, member)
