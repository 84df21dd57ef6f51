"""Results and status that tell the truth (issue 21, item 5).

A result follows the argument rule (strict JSON): a value it cannot carry
fails the job once, filed dead, its handler never run again; the "it
finished" marker lives no longer than the result did; ``status`` read right
after ``result()`` returned says ``complete``; the status's ``retry_count`` is
the filed entry's; a corrupt result key or status hash gets one clear error.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, JobFunction, Settings, Worker, job
from cogworker_async.errors import JobFailed, ResultCorrupt
from cogworker_async.keys import Keys
from tests.helpers import wait_for
from tests.integration.test_cli import cli, one_error

pytestmark = pytest.mark.anyio

runs: dict[str, int] = {}


def _ran(name: str) -> None:
    runs[name] = runs.get(name, 0) + 1


@dataclasses.dataclass
class Point:
    x: int


@job(name="truth.nan", keep_result=60, retry=5)
async def returns_nan() -> float:
    _ran("nan")
    return float("nan")


@job(name="truth.when", keep_result=60, retry=5)
async def returns_datetime() -> datetime.datetime:
    _ran("when")
    return datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@job(name="truth.point", keep_result=60, retry=5)
def returns_dataclass() -> Point:
    _ran("point")
    return Point(1)


@job(name="truth.short", keep_result=1)
async def short() -> str:
    return "soon gone"


@job(name="truth.both", keep_result=60, status=True)
async def both() -> int:
    return 1


@job(name="truth.flaky", status=True, retry=2, retry_in=lambda count, exc, job: 0.1)
async def flaky() -> None:
    raise RuntimeError("again")


ALL: list[JobFunction[Any, Any]] = [
    returns_nan,
    returns_datetime,
    returns_dataclass,
    short,
    both,
    flaky,
]


@pytest.mark.parametrize(
    ("target", "name", "says"),
    [
        (returns_nan, "nan", "nan is not a JSON number"),
        (returns_datetime, "when", "datetime.datetime"),
        (returns_dataclass, "point", "Point"),
    ],
)
async def test_a_result_that_is_not_strict_json_fails_once_and_never_reruns(
    settings: Settings, redis: Redis, keys: Keys, target: Any, name: str, says: str
) -> None:
    runs.pop(name, None)
    async with Client(settings) as client:
        handle = await client.enqueue(target)
        assert handle is not None
        async with Worker(settings, jobs=ALL):
            with pytest.raises(JobFailed) as failed:
                await handle.result(timeout=20)

            async def dead() -> bool:
                return bool(await redis.zcard(keys.dead))

            await wait_for(dead)
    assert failed.value.error_class == "ResultNotJSON"
    assert says in failed.value.error_message
    assert f"truth.{name} returned" in failed.value.error_message
    [entry] = [orjson.loads(e) for e in await redis.zrange(keys.dead, 0, -1)]
    assert entry["jid"] == handle.jid
    assert entry["error_class"] == "ResultNotJSON"
    assert await redis.zcard(keys.retry) == 0  # filed dead at once, not retried
    assert runs[name] == 1  # the handler that succeeded never ran again


async def test_the_finished_marker_lives_no_longer_than_the_result_again(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(short)
        assert handle is not None
        async with Worker(settings, jobs=ALL):
            assert await handle.result(timeout=20) == "soon gone"
    # keep_result=1: the marker is not a day's key per job (86 M at 1,000 jobs/s).
    # A success's ack folds it into the result's own key (store/results.py): that
    # key lives the result's second and one more.
    assert 0 < await redis.pttl(keys.result(handle.jid)) <= 2000
    assert not await redis.exists(keys.result_gone(handle.jid))


async def test_status_read_right_after_the_result_says_complete(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        states = []
        for _ in range(30):
            handle = await client.enqueue(both)
            assert handle is not None
            assert await handle.result(timeout=20) == 1
            found = await handle.status()
            states.append(None if found is None else found.state)
    assert states == ["complete"] * 30


async def test_the_status_retry_count_is_the_filed_entrys(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(flaky)
        assert handle is not None
        async with Worker(settings, jobs=ALL):

            async def dead() -> bool:
                found = await client.status(handle.jid)
                return found is not None and found.state == "dead"

            await wait_for(dead, timeout=30)
        found = await client.status(handle.jid)
    [entry] = [orjson.loads(e) for e in await redis.zrange(keys.dead, 0, -1)]
    assert found is not None
    assert entry["retry_count"] == 2  # what the UI shows (Sidekiq's index of the failure)
    assert found.retry_count == entry["retry_count"]


async def test_a_corrupt_result_key_gets_a_clear_error_and_is_kept(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    garbled, wrong_type = "a" * 24, "b" * 24
    await redis.rpush(keys.result(garbled), b"{not json")
    await redis.set(keys.result(wrong_type), b"a string")
    async with Client(settings) as client:
        with pytest.raises(ResultCorrupt, match=keys.result(garbled)):
            await client.result(garbled, timeout=1)
        with pytest.raises(ResultCorrupt, match=keys.result(wrong_type)):
            await client.result(wrong_type, timeout=1)
    assert await redis.lindex(keys.result(garbled), 0) == b"{not json"  # left for a human


async def test_cli_status_on_a_corrupt_status_hash_is_one_error(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    jid = "c" * 24
    await redis.hset(keys.status(jid), mapping={"state": "working", "started_at": "soon"})
    done = await anyio.to_thread.run_sync(lambda: cli(settings, "status", jid))
    line = one_error(done, 1)
    assert keys.status(jid) in line
    assert "started_at" in line
    wrong = "d" * 24
    await redis.set(keys.status(wrong), b"x")
    done = await anyio.to_thread.run_sync(lambda: cli(settings, "status", wrong))
    assert keys.status(wrong) in one_error(done, 1)
