"""Options honoured whichever way a job is enqueued, and enqueue by name says what it did.

By function, by name from a process that declared the job, by name from one
that did not (a raw payload, the CLI): the same job is run with the same
options, the unknown name is buried at once, and the client warns when no
live process would run what it enqueued by name.
"""

from __future__ import annotations

import logging
import time

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, current_job, job, payload
from cogworker_async.keys import Keys
from tests.helpers import wait_for
from tests.integration.test_cli import cli

pytestmark = pytest.mark.anyio

tries: list[int] = []


@job(name="opt.flaky0", retry=0)
async def flaky0(tag: str) -> None:
    raise ValueError(f"flaky {tag}")


@job(name="opt.mailjob", queue="mail")
async def mailjob(to: str) -> None:
    pass


@job(name="opt.hello")
async def hello() -> None:
    pass


@job(name="opt.second_time_lucky", retry=3)
async def second_time_lucky() -> None:
    tries.append(current_job().retry_count)
    if len(tries) == 1:
        raise RuntimeError("first try fails")


ALL = [flaky0, mailjob, hello, second_time_lucky]


async def _entries(redis: Redis, key: str) -> dict[str, dict[str, object]]:
    return {orjson.loads(e)["jid"]: orjson.loads(e) for e in await redis.zrange(key, 0, -1)}


async def _dead_has(redis: Redis, keys: Keys, jids: list[str | None]) -> bool:
    return set(jids) <= set(await _entries(redis, keys.dead))


async def test_retry_0_goes_to_dead_by_function_and_by_name_alike(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        by_function = await client.enqueue(flaky0, "function")
        by_name_here = await client.enqueue("opt.flaky0", "name")
    # By name from a process that never imported the job: no retry option in
    # the payload, so the worker's registered job must supply it.
    elsewhere = payload.build("opt.flaky0", ["elsewhere"], None, "default", now=time.time())
    assert "retry" not in elsewhere
    await redis.lpush(keys.queue("default"), payload.encode(elsewhere))
    jids = [by_function, by_name_here, elsewhere["jid"]]
    async with Worker(settings, jobs=ALL):
        await wait_for(lambda: _dead_has(redis, keys, jids))
    assert await redis.zcard(keys.retry) == 0
    dead = await _entries(redis, keys.dead)
    assert [dead[j]["error_class"] for j in jids] == ["ValueError"] * 3


async def test_enqueue_by_name_uses_the_declared_queue(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cogworker_async.client")
    async with Client(settings) as client:
        jid = await client.enqueue("opt.mailjob", "a@b.c")
        many = await client.enqueue_many("opt.mailjob", [("x@y.z",), ("p@q.r",)])
        unknown = await client.enqueue("opt.not_declared_anywhere", 1)
    mail = [orjson.loads(e)["jid"] for e in await redis.lrange(keys.queue("mail"), 0, -1)]
    default = [orjson.loads(e)["jid"] for e in await redis.lrange(keys.queue("default"), 0, -1)]
    assert sorted(mail) == sorted([jid, *many])
    assert default == [unknown]
    said = [r for r in caplog.records if "opt.not_declared_anywhere" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.WARNING]
    where = f"enqueued {unknown} on queue default"
    assert (
        said[0]
        .getMessage()
        .startswith(f"{where} (no job named opt.not_declared_anywhere is known here)")
    )


async def test_retry_count_says_which_try_this_is(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    tries.clear()
    async with Client(settings) as client:
        await client.enqueue(second_time_lucky)
    async with Worker(settings, jobs=ALL):
        await wait_for(lambda: _zcard_is(redis, keys.retry, 1))
        entry = (await redis.zrange(keys.retry, 0, -1))[0]
        await redis.zadd(keys.retry, {entry: 0})  # due now, not in 15+ s
        await wait_for(lambda: _len_is(tries, 2))
    assert tries == [0, 1]


async def _zcard_is(redis: Redis, key: str, n: int) -> bool:
    return await redis.zcard(key) == n


async def _len_is(items: list[int], n: int) -> bool:
    return len(items) >= n


async def test_an_unknown_name_goes_to_dead_at_once_with_a_clear_error(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        typo = await client.enqueue("opt.helo")
    async with Worker(settings, jobs=ALL):
        await wait_for(lambda: _dead_has(redis, keys, [typo]))
    assert await redis.zcard(keys.retry) == 0
    entry = (await _entries(redis, keys.dead))[typo]
    assert entry["error_class"] == "UnknownJob"
    assert entry["error_message"] == (
        "no handler registered for 'opt.helo' in this worker (did you mean 'opt.hello'?)"
    )


async def test_unknown_job_retries_gives_a_rolling_deploy_some_time(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    patient = settings.model_copy(update={"unknown_job_retries": 1})
    async with Client(patient) as client:
        typo = await client.enqueue("opt.helo")
    async with Worker(patient, jobs=ALL):
        await wait_for(lambda: _zcard_is(redis, keys.retry, 1))  # one retry allowed
        assert list(await _entries(redis, keys.retry)) == [typo]
        entry = (await redis.zrange(keys.retry, 0, -1))[0]
        await redis.zadd(keys.retry, {entry: 0})  # due now
        await wait_for(lambda: _dead_has(redis, keys, [typo]))
    assert await redis.zcard(keys.retry) == 0


async def test_enqueue_by_name_warns_when_no_live_process_would_run_it(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cogworker_async.client")
    async with Client(settings) as client:
        await client.enqueue("opt.hello")
    client_said = [r.getMessage() for r in caplog.records if r.name.endswith("client")]
    assert [line.split("; ", 1)[1] for line in client_said] == [
        "no live process is running: the job waits on queue 'default' until one reads it"
    ]
    caplog.clear()
    worker = Worker(settings, jobs=ALL)
    async with worker:
        presence = orjson.loads(await redis.get(keys.process(worker.identity)))
        assert presence["jobs"] == sorted(f.name for f in ALL)
        async with Client(settings) as client:
            await client.enqueue("opt.hello")  # known here and by the worker: nothing to say
            nobody = await client.enqueue("opt.nobody")
            done = await client.enqueue_by_name("opt.hello", queue="elsewhere")
        assert done.warnings == (
            "no live process reads queue 'elsewhere' (they read: default): "
            "the job waits there until one does",
        )
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name.endswith("client")]
    assert said == [
        (
            logging.WARNING,
            f"enqueued {nobody} on queue default (no job named opt.nobody is known here); "
            "no live process reading queue 'default' knows a job named 'opt.nobody': "
            "it will be buried in dead as UnknownJob unless one that does starts",
        )
    ]


async def test_cli_enqueue_by_name_says_where_it_went_and_warns(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Worker(settings, jobs=ALL):
        known = await anyio.to_thread.run_sync(lambda: cli(settings, "enqueue", "opt.hello"))
        unknown = await anyio.to_thread.run_sync(lambda: cli(settings, "enqueue", "opt.nobody"))
        away = await anyio.to_thread.run_sync(
            lambda: cli(settings, "enqueue", "opt.hello", "--queue", "elsewhere")
        )
    for done in (known, unknown, away):
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.strip()) == 24  # stdout: the jid alone
    jid = known.stdout.strip()
    # The CLI declares no jobs: it says which queue it chose; the live worker knows the name.
    assert known.stderr.splitlines() == [
        f"enqueued {jid} on queue default (no job named opt.hello is known here)"
    ]
    jid = unknown.stdout.strip()
    assert unknown.stderr.splitlines() == [
        f"enqueued {jid} on queue default (no job named opt.nobody is known here)",
        "warning: no live process reading queue 'default' knows a job named 'opt.nobody': "
        "it will be buried in dead as UnknownJob unless one that does starts",
    ]
    assert away.stderr.splitlines() == [
        "warning: no live process reads queue 'elsewhere' (they read: default): "
        "the job waits there until one does"
    ]
