"""A failure's traceback: logged once per attempt (WARNING retried, ERROR terminal) and
kept in its retry/dead entry within the cap, the handler's frames first, none when the
job opts out, none invented for a verdict of the worker's (a timeout, an unknown name)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.keys import Keys
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

CAP = 2000  # error_backtrace_max in these tests: small, so the bounds are tested


def _fail_here(what: str) -> None:
    raise ValueError(what)


RAISE_LINE = inspect.getsourcelines(_fail_here)[1] + 1


@job(name="bt.boom", retry=0)
async def boom(what: str) -> None:
    _fail_here(what)


@job(name="bt.retried", retry=1)
async def retried() -> None:
    _fail_here("try again")


@job(name="bt.quiet", retry=0, backtrace=False)
async def quiet() -> None:
    _fail_here("keep no backtrace")


@job(name="bt.sync", retry=0)
def sync_boom() -> None:
    _fail_here("in a thread")


def _recurse(depth: int) -> None:
    if depth == 0:
        raise RecursionError("bottom")
    _recurse(depth - 1)


@job(name="bt.deep", retry=0)
async def deep() -> None:
    _recurse(600)


@job(name="bt.huge", retry=0)
async def huge() -> None:
    raise ValueError("m" * 1_000_000)


@job(name="bt.slow", retry=0, timeout=0.05)
async def slow() -> None:
    await asyncio.sleep(30)


SLEEP_LINE = inspect.getsourcelines(slow.fn)[1] + 2


ALL = [boom, retried, quiet, sync_boom, deep, huge, slow]


@pytest.fixture
def capped(settings: Settings) -> Settings:
    return settings.model_copy(update={"error_backtrace_max": CAP, "error_backtrace_frames": 8})


async def _entries(redis: Redis, key: str) -> dict[str, dict[str, Any]]:
    return {e["jid"]: e for e in map(orjson.loads, await redis.zrange(key, 0, -1))}


async def _run_until_filed(
    settings: Settings, redis: Redis, keys: Keys, jids: list[str]
) -> dict[str, dict[str, Any]]:
    async def filed() -> bool:
        found = (await _entries(redis, keys.dead)) | (await _entries(redis, keys.retry))
        return all(jid in found for jid in jids)

    async with Worker(settings, jobs=ALL):
        await wait_for(filed, timeout=20)
    return (await _entries(redis, keys.dead)) | (await _entries(redis, keys.retry))


def _failure_records(caplog: pytest.LogCaptureFixture, jid: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith(f"jid={jid} ")]


async def test_a_dead_job_logs_one_error_and_keeps_its_backtrace(
    capped: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cogworker_async")
    async with Client(capped) as client:
        jid = await client.enqueue(boom, "the handler's own error")
    entry = (await _run_until_filed(capped, redis, keys, [jid]))[jid]
    (record,) = _failure_records(caplog, jid)
    assert record.levelno == logging.ERROR
    assert "failed queue=default" in record.getMessage()
    assert "ValueError: the handler's own error; buried in dead" in record.getMessage()
    where = f'File "{__file__}", line {RAISE_LINE}, in _fail_here'
    assert record.exc_text is not None
    assert where in record.exc_text
    assert record.exc_text.endswith("ValueError: the handler's own error")
    # The same text in the dead entry, the library's frames dropped.
    backtrace = entry["error_backtrace"]
    assert backtrace == record.exc_text
    assert len(backtrace) <= CAP
    assert backtrace.startswith("Traceback (most recent call last):")
    assert f"line {RAISE_LINE}, in _fail_here" in backtrace
    assert ", in boom\n" in backtrace
    assert "cogworker_async" not in backtrace
    assert "asyncio" not in backtrace


async def test_a_retried_attempt_is_a_warning_with_its_traceback(
    capped: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cogworker_async")
    async with Client(capped) as client:
        jid = await client.enqueue(retried)
    entry = (await _run_until_filed(capped, redis, keys, [jid]))[jid]
    (record,) = _failure_records(caplog, jid)  # once per attempt
    assert record.levelno == logging.WARNING
    assert "; retry 1 of 1 in " in record.getMessage()
    assert record.exc_text is not None
    assert f"line {RAISE_LINE}" in record.exc_text
    assert f"line {RAISE_LINE}, in _fail_here" in entry["error_backtrace"]
    assert await redis.zscore(keys.retry, orjson.dumps(entry)) is not None


async def test_opting_out_keeps_no_backtrace_but_still_logs_it(
    capped: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cogworker_async")
    async with Client(capped) as client:
        by_job = await client.enqueue(quiet)
        by_enqueue = await client.enqueue(boom.options(backtrace=False), "x")
        # A payload pushed by another producer, with Sidekiq's flag, and an old backtrace.
        by_payload = "c" * 24
        pushed = {
            "jid": by_payload,
            "class": "bt.boom",
            "args": ["y"],
            "queue": "default",
            "created_at": 1.0,
            "enqueued_at": 1.0,
            "backtrace": False,
            "error_backtrace": "an earlier failure's",
        }
        await redis.lpush(keys.queue("default"), orjson.dumps(pushed))
    entries = await _run_until_filed(capped, redis, keys, [by_job, by_enqueue, by_payload])
    for jid in (by_job, by_enqueue, by_payload):
        assert "error_backtrace" not in entries[jid], jid
        assert entries[jid]["error_class"] == "ValueError"
        (record,) = _failure_records(caplog, jid)
        assert record.exc_text is not None
        assert f"line {RAISE_LINE}" in record.exc_text


async def test_a_number_of_frames_keeps_at_most_that_many(
    capped: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(capped) as client:
        jid = await client.enqueue(deep.options(backtrace=3))
    entry = (await _run_until_filed(capped, redis, keys, [jid]))[jid]
    backtrace = entry["error_backtrace"]
    assert backtrace.count('  File "') == 3
    assert "frames omitted" in backtrace
    assert backtrace.endswith("RecursionError: bottom")


async def test_a_huge_traceback_stays_within_the_cap(
    capped: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cogworker_async")
    async with Client(capped) as client:
        deep_jid = await client.enqueue(deep)
        huge_jid = await client.enqueue(huge)
    entries = await _run_until_filed(capped, redis, keys, [deep_jid, huge_jid])
    deep_trace = entries[deep_jid]["error_backtrace"]
    assert len(deep_trace) <= CAP
    assert deep_trace.count('  File "') <= 8  # error_backtrace_frames
    assert ", in deep\n" in deep_trace  # the handler's frame, outermost, kept
    assert deep_trace.endswith("RecursionError: bottom")
    huge_trace = entries[huge_jid]["error_backtrace"]
    assert len(huge_trace) <= CAP
    assert ", in huge\n" in huge_trace
    assert "characters cut" in huge_trace
    for jid in (deep_jid, huge_jid):
        (record,) = _failure_records(caplog, jid)
        assert record.exc_text is not None
        assert len(record.exc_text) <= CAP
        assert len(record.getMessage()) < 2 * capped.error_message_max


async def test_a_thread_handler_shows_its_frames_not_the_threads(
    capped: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(capped) as client:
        jid = await client.enqueue(sync_boom)
    backtrace = (await _run_until_filed(capped, redis, keys, [jid]))[jid]["error_backtrace"]
    assert ", in sync_boom\n" in backtrace
    assert f"line {RAISE_LINE}, in _fail_here" in backtrace
    assert "threading" not in backtrace
    assert "cogworker_async" not in backtrace


async def test_an_unknown_name_gets_no_invented_traceback(
    capped: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cogworker_async")
    async with Client(capped) as client:
        unknown = await client.enqueue("bt.nobody_knows_me")
    entry = (await _run_until_filed(capped, redis, keys, [unknown]))[unknown]
    assert entry["error_class"] == "UnknownJob"
    assert "error_backtrace" not in entry
    (record,) = _failure_records(caplog, unknown)
    assert record.levelno == logging.ERROR
    assert record.exc_text is None


async def test_a_timeout_shows_where_the_handler_was(
    capped: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cogworker_async")
    async with Client(capped) as client:
        timed_out = await client.enqueue(slow)
    entry = (await _run_until_filed(capped, redis, keys, [timed_out]))[timed_out]
    assert entry["error_class"] == "JobTimeout"
    backtrace = entry["error_backtrace"]
    assert backtrace.startswith("Where the handler was when its timeout cancelled it")
    assert f"line {SLEEP_LINE}, in slow\n    await asyncio.sleep(30)" in backtrace
    assert backtrace.endswith("errors.JobTimeout: ran past its timeout of 0.05 s")
    assert "Traceback" not in backtrace  # no worker frames dressed up as the failure
    assert backtrace.count('  File "') == 1  # the handler's own, not the worker's
    (record,) = _failure_records(caplog, timed_out)
    assert record.levelno == logging.ERROR
    assert record.exc_text == backtrace
