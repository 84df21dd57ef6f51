"""includes/history.lua through fetch.lua, ack.lua and file.lua: runs counted with the
acks that settle them, a resent ack counted once, failures counted by their filing."""

from __future__ import annotations

import logging
import time

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.observability.history import MINUTE_TTL, parse_minute
from cogworker_async.store import commands
from cogworker_async.store.commands import Ack, Filing
from cogworker_async.worker.unsettled import file_unsettled
from tests.lua.support import enqueue, jid_of, make_job
from tests.unit.test_history import run

pytestmark = pytest.mark.anyio

ME = "host:1:me"
MINUTE = 29_000_000


async def listed(redis: Redis, keys: Keys, count: int) -> list[bytes]:
    """``count`` jobs on our in-progress list, fetched as a worker does."""
    await enqueue(redis, keys, "q", *(make_job("q") for _ in range(count)))
    result = await commands.fetch(
        redis, keys, identity=ME, queues=["q"], want=count, acks=[], reliable=True
    )
    assert len(result.jobs) == count
    return result.jobs


async def minute(redis: Redis, keys: Keys, at: int = MINUTE) -> dict[bytes, bytes]:
    fields = await redis.hgetall(keys.history(at))
    assert isinstance(fields, dict)
    return fields


async def test_fetch_counts_acked_runs_per_name_and_bucket(redis: Redis, keys: Keys) -> None:
    jobs = await listed(redis, keys, 5)
    runs = [
        run("a", MINUTE, 1_000),
        run("a", MINUTE, 25_000),
        run("b", MINUTE, 2_000),
        run("a", MINUTE, 3_000),
        run("a", MINUTE + 1, 70_000),
    ]
    acks = [Ack(raw, jid_of(raw), run) for raw, run in zip(jobs, runs, strict=True)]
    result = await commands.fetch(
        redis, keys, identity=ME, queues=["q"], want=0, acks=acks, reliable=True
    )
    assert result.missing_acks == []
    assert await minute(redis, keys) == {
        b"a|us": b"29000",
        b"a|h0": b"2",
        b"a|h1": b"1",
        b"b|us": b"2000",
        b"b|h0": b"1",
    }
    assert await minute(redis, keys, MINUTE + 1) == {b"a|us": b"70000", b"a|h4": b"1"}
    counts = parse_minute(await minute(redis, keys))
    assert (counts.processed, counts.failed, counts.jobs["a"].runs) == (4, 0, 3)
    ttl = await redis.ttl(keys.history(MINUTE))
    assert MINUTE_TTL - 5 <= ttl <= MINUTE_TTL
    assert await redis.get(keys.stats_processed) == b"5"


async def test_resent_acks_count_once_only_what_this_call_removed(redis: Redis, keys: Keys) -> None:
    jobs = await listed(redis, keys, 3)
    runs = [run("a", MINUTE, 1_000), run("a", MINUTE, 40_000), run("b", MINUTE, 5)]
    acks = [Ack(raw, jid_of(raw), run) for raw, run in zip(jobs, runs, strict=True)]
    await commands.ack(redis, keys, identity=ME, acks=acks[:2])
    # The reply was lost: the caller resends both, with a third one beside them.
    missing = await commands.ack(redis, keys, identity=ME, acks=acks)
    assert missing == acks[:2]
    assert await minute(redis, keys) == {
        b"a|us": b"41000",
        b"a|h0": b"1",
        b"a|h2": b"1",
        b"b|us": b"5",
        b"b|h0": b"1",
    }
    # Everything resent again: nothing more is counted, no field goes to 0 or below.
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == acks
    counts = parse_minute(await minute(redis, keys))
    assert counts.processed == 3
    assert counts.jobs["a"].runs == 2


async def test_acks_without_runs_write_no_history(redis: Redis, keys: Keys) -> None:
    jobs = await listed(redis, keys, 2)
    await commands.ack(redis, keys, identity=ME, acks=[Ack(raw, jid_of(raw)) for raw in jobs])
    assert await redis.keys(keys.history_prefix + "*") == []
    assert await redis.get(keys.stats_processed) == b"2"


async def test_a_run_beside_an_uncounted_ack(redis: Redis, keys: Keys) -> None:
    jobs = await listed(redis, keys, 2)
    acks = [Ack(jobs[0], jid_of(jobs[0])), Ack(jobs[1], jid_of(jobs[1]), run("a", MINUTE, 9))]
    await commands.ack(redis, keys, identity=ME, acks=acks)
    counts = parse_minute(await minute(redis, keys))
    assert counts.processed == 1
    assert counts.jobs["a"].runs == 1


async def test_basic_mode_counts_runs_without_a_list(redis: Redis, keys: Keys) -> None:
    acks = [Ack(b"", "", run("a", MINUTE, 10)), Ack(b"", "", run("a", MINUTE, 20))]
    await commands.fetch(redis, keys, identity=ME, queues=[], want=0, acks=acks, reliable=False)
    counts = parse_minute(await minute(redis, keys))
    assert (counts.processed, counts.jobs["a"].runs, counts.jobs["a"].run_us) == (2, 2, 30)


async def test_a_wrong_typed_history_key_never_fails_the_acks(redis: Redis, keys: Keys) -> None:
    await redis.set(keys.history(MINUTE), "not a hash")
    jobs = await listed(redis, keys, 2)
    acks = [Ack(raw, jid_of(raw), run("a", MINUTE, 1)) for raw in jobs]
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == []
    assert await redis.llen(keys.in_progress(ME)) == 0
    assert await redis.get(keys.stats_processed) == b"2"
    assert await redis.get(keys.history(MINUTE)) == b"not a hash"


async def test_file_counts_a_failure_under_its_name(redis: Redis, keys: Keys) -> None:
    jobs = await listed(redis, keys, 3)
    now_minute = int(time.time() // 60)
    for raw, counted in zip(jobs, ["mail.send", "", None], strict=True):
        filing = Filing(raw, jid_of(raw), keys.dead, time.time(), raw, counted)
        assert await commands.file(
            redis, keys, identity=ME, filing=filing, dead_max_jobs=100, dead_timeout=3600
        )
    # Summed over this minute and the next: the filings may straddle a boundary.
    totals: dict[bytes, int] = {}
    for at in (now_minute, now_minute + 1):
        for field, value in (await minute(redis, keys, at)).items():
            totals[field] = totals.get(field, 0) + int(value)
        ttl = await redis.ttl(keys.history(at))
        assert ttl == -2 or MINUTE_TTL - 5 <= ttl <= MINUTE_TTL
    # The uncounted one (history off) is in the stats totals only.
    assert totals == {b"|f": 1, b"mail.send|f": 1}
    assert await redis.get(keys.stats_failed) == b"3"


async def test_file_of_a_job_already_gone_counts_nothing(redis: Redis, keys: Keys) -> None:
    raw = make_job("q")
    filing = Filing(raw, jid_of(raw), keys.dead, time.time(), raw, "a")
    assert not await commands.file(
        redis, keys, identity=ME, filing=filing, dead_max_jobs=100, dead_timeout=3600
    )
    assert await redis.keys(keys.history_prefix + "*") == []


async def test_ttl_set_when_a_field_is_created_not_on_every_call(redis: Redis, keys: Keys) -> None:
    jobs = await listed(redis, keys, 3)
    await commands.ack(
        redis, keys, identity=ME, acks=[Ack(jobs[0], jid_of(jobs[0]), run("a", MINUTE, 10))]
    )
    assert await redis.ttl(keys.history(MINUTE)) > MINUTE_TTL - 5
    await redis.expire(keys.history(MINUTE), 100)
    # Same fields: counted, the TTL left alone (no EXPIRE per call).
    await commands.ack(
        redis, keys, identity=ME, acks=[Ack(jobs[1], jid_of(jobs[1]), run("a", MINUTE, 20))]
    )
    assert await redis.ttl(keys.history(MINUTE)) <= 100
    # A new field (another bucket): the TTL is set again.
    await commands.ack(
        redis, keys, identity=ME, acks=[Ack(jobs[2], jid_of(jobs[2]), run("a", MINUTE, 50_000))]
    )
    assert await redis.ttl(keys.history(MINUTE)) > MINUTE_TTL - 5
    assert parse_minute(await minute(redis, keys)).jobs["a"].runs == 3


async def test_a_handed_over_failure_is_counted_when_filed(redis: Redis, keys: Keys) -> None:
    named = make_job("q")
    entry = orjson.dumps({**orjson.loads(named), "error_class": "ValueError"})
    unnamed = b'{"raw": "{not json", "error_class": "UnparseableJob"}'
    for raw, payload in ((named, entry), (b"x", unnamed)):
        filing = Filing(raw, jid_of(named), keys.dead, time.time(), payload)
        await redis.rpush(keys.unsettled, commands.unsettled_record(filing, keys))
    now_minute = int(time.time() // 60)
    filed = await file_unsettled(redis, keys, logging.getLogger("test"), history=True)
    assert filed == 2
    totals: dict[bytes, int] = {}
    for at in (now_minute, now_minute + 1):
        for field, value in (await minute(redis, keys, at)).items():
            totals[field] = totals.get(field, 0) + int(value)
    assert totals == {b"tests.job|f": 1, b"|f": 1}
    assert await redis.get(keys.stats_failed) == b"2"
