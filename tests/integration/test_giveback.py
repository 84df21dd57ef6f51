"""Giving jobs back: a lost reply is asked again, never taken for "still ours"."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.worker import giveback
from cogworker_async.worker.giveback import GiveBack
from tests.lua.support import drain, enqueue, make_job

pytestmark = pytest.mark.anyio

ME = "host:1:me"


async def _fetched(redis: Redis, keys: Keys, count: int) -> list[bytes]:
    jobs = [make_job("q") for _ in range(count)]
    await enqueue(redis, keys, "q", *jobs)
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["q"], want=count, acks=[], reliable=True
    )
    return got.jobs


def _give_back(
    redis: Redis,
    keys: Keys,
    sources: Callable[[Sequence[bytes]], Mapping[bytes, str]] | None = None,
) -> GiveBack:
    return GiveBack(
        redis,
        keys,
        identity=ME,
        default_queue="q",
        logger=logging.getLogger("test.giveback"),
        rng=random.Random(1),
        sources=sources,
    )


async def _in_background(back: GiveBack, newest_first: list[bytes]) -> list[bytes]:
    """Give jobs back through ``later`` and its task; returns what was kept."""
    kept: list[bytes] = []
    done = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(back.run, done.set)
        back.later(newest_first, keep=kept.extend)
        assert back.busy
        assert back.pending == newest_first  # still ours (held) until it lands
        with anyio.fail_after(10):
            await done.wait()
        group.cancel_scope.cancel()
    assert not back.busy
    return kept


@pytest.fixture
def reply_lost_once(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first give back runs in Redis, then its reply is 'lost' (a connection error)."""
    real = commands.give_back
    calls: list[int] = []

    async def flaky(*args: Any, **kwargs: Any) -> commands.GiveBackResult:
        calls.append(1)
        result = await real(*args, **kwargs)
        if len(calls) == 1:
            raise RedisConnectionError("reply lost")
        return result

    monkeypatch.setattr(giveback.commands, "give_back", flaky)
    return calls


async def test_a_lost_reply_is_asked_again_and_the_job_is_not_kept(
    redis: Redis, keys: Keys, reply_lost_once: list[int]
) -> None:
    (job,) = await _fetched(redis, keys, 1)
    assert await _give_back(redis, keys).one(job) is True  # not ours: never run here too
    assert len(reply_lost_once) == 2
    assert await drain(redis, keys.queue("q")) == [job]
    assert await redis.exists(keys.in_progress(ME)) == 0


async def test_background_give_back_after_a_lost_reply_keeps_nothing(
    redis: Redis, keys: Keys, reply_lost_once: list[int]
) -> None:
    a, b, c = await _fetched(redis, keys, 3)
    assert await _in_background(_give_back(redis, keys), [c, b]) == []
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [a]
    assert await drain(redis, keys.queue("q")) == [b, c]


async def test_jobs_a_queue_refuses_are_kept_oldest_first(redis: Redis, keys: Keys) -> None:
    a, b = await _fetched(redis, keys, 2)
    await redis.delete(keys.queue("q"))
    await redis.set(keys.queue("q"), "not a list")
    assert await _in_background(_give_back(redis, keys), [b, a]) == [a, b]
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [b, a]


async def test_a_job_goes_back_to_the_queue_it_was_fetched_from(redis: Redis, keys: Keys) -> None:
    """Its payload names another queue (a producer's choice): it still goes back to "q"."""
    elsewhere = make_job("p")
    await enqueue(redis, keys, "q", elsewhere)
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["q"], want=1, acks=[], reliable=True
    )
    assert got.jobs == [elsewhere]
    back = _give_back(redis, keys, sources=lambda jobs: dict.fromkeys(jobs, "q"))
    assert await back.one(elsewhere) is True
    assert await drain(redis, keys.queue("q")) == [elsewhere]
    assert await redis.llen(keys.queue("p")) == 0


async def test_basic_fetch_give_back_after_a_lost_reply_pushes_each_job_once(
    redis: Redis, keys: Keys, reply_lost_once: list[int]
) -> None:
    """No list in basic fetch: the repeat carries the first call's marker, so the jobs
    that call pushed are not pushed again (a duplicate run), nor dropped (a loss)."""
    a, b = make_job("q"), make_job("q")  # popped: held in memory only
    back = GiveBack(
        redis,
        keys,
        identity=ME,
        default_queue="q",
        logger=logging.getLogger("test.giveback"),
        rng=random.Random(1),
        listed=False,
    )
    assert await _in_background(back, [b, a]) == []
    assert len(reply_lost_once) == 2
    assert await drain(redis, keys.queue("q")) == [a, b]


async def test_basic_fetch_give_back_cut_off_by_a_stop_is_sent_again_at_the_stop(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop cancels a give back whose call ran but whose reply never came: at_stop
    sends it again with its marker (pushed once), then gives back what is held."""
    real = commands.give_back
    landed = anyio.Event()

    async def reply_never_comes(*args: Any, **kwargs: Any) -> commands.GiveBackResult:
        await real(*args, **kwargs)
        landed.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    a, b, held = make_job("q"), make_job("q"), make_job("q")
    back = GiveBack(
        redis,
        keys,
        identity=ME,
        default_queue="q",
        logger=logging.getLogger("test.giveback"),
        rng=random.Random(1),
        listed=False,
    )
    monkeypatch.setattr(giveback.commands, "give_back", reply_never_comes)
    async with anyio.create_task_group() as group:
        group.start_soon(back.run, lambda: None)
        back.later([b, a], keep=lambda kept: None)
        with anyio.fail_after(10):
            await landed.wait()
        group.cancel_scope.cancel()  # the stop
    monkeypatch.setattr(giveback.commands, "give_back", real)
    assert await back.at_stop([held]) == []
    # Shed jobs are the newest held (taken from the back of the ready queue): the
    # jobs still held run before them.
    assert await drain(redis, keys.queue("q")) == [held, a, b]
