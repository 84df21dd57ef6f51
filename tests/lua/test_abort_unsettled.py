"""abort_unsettled.lua and file_unsettled.lua's tombstone check: an abort reaches a
failure a stopping process handed over (``<ns>:unsettled``), and a handed-over
job whose abort was answered while it ran is never filed into retry."""

from __future__ import annotations

import asyncio
import logging
import time

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.client.aborting import AbortOutcome, abort_job
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import aborts, commands
from cogworker_async.worker.unsettled import file_unsettled
from tests.lua.support import jid_of, make_job

pytestmark = pytest.mark.anyio


def _record(keys: Keys, raw: bytes, target: str) -> bytes:
    """The record a stopping process hands over for ``raw``'s failure."""
    entry = orjson.dumps({**orjson.loads(raw), "retry_count": 0, "error_class": "E"})
    filing = commands.Filing(raw, jid_of(raw), target, time.time() + 600, entry)
    return commands.unsettled_record(filing, keys)


async def _hand_over(redis: Redis, keys: Keys, *jobs: bytes, target: str = "") -> list[bytes]:
    records = [_record(keys, raw, target or keys.retry) for raw in jobs]
    await redis.rpush(keys.unsettled, *records)
    return records


def _tracked_unique_job(keys: Keys) -> tuple[bytes, str]:
    """A job keeping its result, holding an ``until_executed`` unique lock."""
    lock = keys.unique("t.job:unsettled")
    unique = {"key": lock, "mode": "until_executed", "for": 60}
    return make_job("q", unique=unique, keep_result=60), lock


async def _told_aborted(redis: Redis, keys: Keys, jid: str, message: str) -> None:
    """Its status says aborted and its result waiters read ``JobAborted``."""
    assert await redis.hget(keys.status(jid), "state") == b"aborted"
    [envelope] = await redis.lrange(keys.result(jid), 0, -1)
    assert orjson.loads(envelope) == {
        "ok": False,
        "error_class": "JobAborted",
        "error_message": message,
    }


async def test_an_unsettled_job_is_found_across_windows_and_aborted_in_one_step(
    redis: Redis, keys: Keys
) -> None:
    target, lock = _tracked_unique_job(keys)
    jid = jid_of(target)
    others = [make_job("q") for _ in range(9)]
    # The oldest record (at the head): the last window counted from the tail.
    records = await _hand_over(redis, keys, target, *others)
    await redis.set(lock, jid)
    await redis.set(keys.orphanings(jid), 2)
    await redis.hset(keys.status(jid), mapping={"state": "working"})

    assert await aborts.remove_unsettled(redis, keys, jid, window=4) == _payload(records[0])
    assert await redis.lrange(keys.unsettled, 0, -1) == records[1:]
    assert await redis.zscore(keys.aborted, jid) is not None
    assert await redis.get(keys.stat("aborted")) == b"1"
    assert await redis.exists(lock, keys.orphanings(jid)) == 0
    await _told_aborted(redis, keys, jid, aborts.BEFORE_RUN)
    assert await redis.zcard(keys.retry) == 0


def _payload(record: bytes) -> bytes:
    payload = orjson.loads(record)["payload"]
    assert isinstance(payload, str)
    return payload.encode()


async def test_another_jobs_record_naming_the_jid_in_its_args_is_left(
    redis: Redis, keys: Keys
) -> None:
    victim = make_job("q")
    jid = jid_of(victim)
    decoy = make_job("q", args=[jid])
    records = await _hand_over(redis, keys, victim, decoy)
    assert await aborts.remove_unsettled(redis, keys, jid) == _payload(records[0])
    assert await redis.lrange(keys.unsettled, 0, -1) == [records[1]]
    assert await aborts.remove_unsettled(redis, keys, "0" * 24) is None
    assert await redis.get(keys.stat("aborted")) == b"1"


async def test_a_lock_a_newer_copy_holds_is_kept(redis: Redis, keys: Keys) -> None:
    raw, lock = _tracked_unique_job(keys)
    await _hand_over(redis, keys, raw)
    await redis.set(lock, "a-newer-copy")
    assert await aborts.remove_unsettled(redis, keys, jid_of(raw)) is not None
    assert await redis.get(lock) == b"a-newer-copy"


async def test_whoever_takes_the_record_first_has_the_job(redis: Redis, keys: Keys) -> None:
    """Aborted first: the filing finds another head and files nothing. Filed first:
    the abort finds nothing there (the job is in retry, where the search looks)."""
    aborted, filed = make_job("q"), make_job("q")
    [first] = await _hand_over(redis, keys, aborted)
    assert await aborts.remove_unsettled(redis, keys, jid_of(aborted)) is not None
    outcome = await commands.file_unsettled(
        redis,
        keys,
        record=first,
        target=keys.retry,
        jid=jid_of(aborted),
        score=time.time() + 600,
        entry=_payload(first),
    )
    assert outcome is commands.FileOutcome.GONE
    assert await redis.zcard(keys.retry) == 0

    [second] = await _hand_over(redis, keys, filed)
    assert await file_unsettled(redis, keys, logging.getLogger("test")) == 1
    assert await aborts.remove_unsettled(redis, keys, jid_of(filed)) is None
    assert await redis.zrange(keys.retry, 0, -1) == [_payload(second)]
    assert await redis.zscore(keys.aborted, jid_of(filed)) is None


async def test_a_wrong_typed_unsettled_key_is_passed_over(
    redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    await redis.set(keys.unsettled, "not a list")
    with caplog.at_level(logging.WARNING, logger="cogworker_async.client"):
        assert await aborts.remove_unsettled(redis, keys, "0" * 24) is None
    assert keys.unsettled in caplog.text


async def test_a_tombstoned_job_bound_for_retry_is_filed_as_aborted(
    redis: Redis, keys: Keys
) -> None:
    """An abort answered "cancelling" while it ran, then handed over at shutdown:
    filed as aborted (as file.lua does), its lock released, its waiters told."""
    raw, lock = _tracked_unique_job(keys)
    jid = jid_of(raw)
    other = make_job("q")
    await _hand_over(redis, keys, raw, other)
    await redis.set(lock, jid)
    await redis.set(keys.orphanings(jid), 1)
    await redis.hset(keys.status(jid), mapping={"state": "working"})
    await aborts.abort_running(redis, keys, jid)

    assert await file_unsettled(redis, keys, logging.getLogger("test")) == 2
    assert [orjson.loads(e)["jid"] for e in await redis.zrange(keys.retry, 0, -1)] == [
        jid_of(other)
    ]
    assert await redis.llen(keys.unsettled) == 0
    assert await redis.get(keys.stat("aborted")) == b"1"
    assert await redis.get(keys.stats_failed) == b"1"  # the other one only
    assert await redis.exists(lock, keys.orphanings(jid)) == 0
    await _told_aborted(redis, keys, jid, aborts.WHILE_RUNNING)


async def test_a_tombstoned_job_bound_for_dead_is_filed_there(redis: Redis, keys: Keys) -> None:
    """As file.lua: a dead filing never runs again either way, so it stays as it is."""
    raw = make_job("q")
    [record] = await _hand_over(redis, keys, raw, target=keys.dead)
    await aborts.abort_running(redis, keys, jid_of(raw))
    outcome = await commands.file_unsettled(
        redis,
        keys,
        record=record,
        target=keys.dead,
        jid=jid_of(raw),
        score=time.time(),
        entry=_payload(record),
    )
    assert outcome is commands.FileOutcome.FILED
    assert await redis.zrange(keys.dead, 0, -1) == [_payload(record)]
    assert await redis.get(keys.stat("aborted")) is None


async def test_a_wrong_typed_tombstone_set_never_stops_an_unsettled_filing(
    redis: Redis, keys: Keys
) -> None:
    raw = make_job("q")
    await _hand_over(redis, keys, raw)
    await redis.set(keys.aborted, "not a sorted set")
    assert await file_unsettled(redis, keys, logging.getLogger("test")) == 1
    assert await redis.zcard(keys.retry) == 1


async def test_aborts_racing_the_filing_of_the_unsettled_list_each_remove_their_job(
    redis: Redis, keys: Keys, settings: Settings
) -> None:
    """Whichever takes a record first, every abort answers "removed": a record the
    filing took first is found in retry by the search's next look and removed there."""
    jobs = [make_job("q") for _ in range(40)]
    await _hand_over(redis, keys, *jobs)
    filings = [file_unsettled(redis, keys, logging.getLogger("test")) for _ in range(2)]
    aborts_sent = [abort_job(redis, keys, settings, jid_of(raw)) for raw in jobs]
    replies = await asyncio.gather(*filings, *aborts_sent)
    assert replies[2:] == [AbortOutcome.REMOVED] * len(jobs)
    assert await redis.llen(keys.unsettled) == 0
    assert await redis.zcard(keys.retry) == 0
    assert await redis.zcard(keys.aborted) == len(jobs)
    assert await redis.get(keys.stat("aborted")) == str(len(jobs)).encode()
