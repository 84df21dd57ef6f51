"""file.lua (settling a failed job) and bury.lua (an unrunnable scheduled entry)."""

from __future__ import annotations

import time

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import DAY_STAT_TTL, Filing, today
from tests.lua.support import enqueue, jid_of, make_job

pytestmark = pytest.mark.anyio

ME = "host:2:me"
MANY = 10_000
DAY = 24 * 3600.0


async def _in_progress(redis: Redis, keys: Keys, *jobs: bytes) -> None:
    await enqueue(redis, keys, "q", *jobs)
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["q"], want=len(jobs), acks=[], reliable=True
    )
    assert got.jobs == list(jobs)


def _entry(raw: bytes, **fields: object) -> bytes:
    return orjson.dumps({**orjson.loads(raw), **fields})


async def _counts(redis: Redis, keys: Keys) -> tuple[int, int, int, int]:
    day = today()
    values = await redis.mget(
        keys.stats_processed,
        keys.stats_failed,
        keys.stats_processed_on(day),
        keys.stats_failed_on(day),
    )
    a, b, c, d = (int(v or 0) for v in values)
    return a, b, c, d


async def _file(
    redis: Redis,
    keys: Keys,
    raw: bytes,
    target: str | None,
    score: float,
    entry: bytes,
    *,
    dead_max_jobs: int = MANY,
    dead_timeout: float = 180 * DAY,
) -> bool:
    filing = Filing(raw=raw, jid=jid_of(raw), target=target, score=score, entry=entry)
    return bool(
        await commands.file(
            redis,
            keys,
            identity=ME,
            filing=filing,
            dead_max_jobs=dead_max_jobs,
            dead_timeout=dead_timeout,
        )
    )


async def test_file_to_retry(redis: Redis, keys: Keys) -> None:
    raw, other = make_job("q"), make_job("q")
    await _in_progress(redis, keys, raw, other)
    await redis.set(keys.orphanings(jid_of(raw)), 2)
    entry = _entry(raw, retry_count=0, error_class="ValueError")
    due = time.time() + 30
    assert await _file(redis, keys, raw, keys.retry, due, entry) is True
    assert await redis.zrange(keys.retry, 0, -1, withscores=True) == [(entry, pytest.approx(due))]
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [other]
    assert await redis.exists(keys.orphanings(jid_of(raw))) == 0
    assert await redis.exists(keys.dead) == 0
    assert await _counts(redis, keys) == (1, 1, 1, 1)
    for key in (keys.stats_processed_on(today()), keys.stats_failed_on(today())):
        assert DAY_STAT_TTL - 60 < await redis.ttl(key) <= DAY_STAT_TTL


async def test_file_to_dead(redis: Redis, keys: Keys) -> None:
    raw = make_job("q")
    await _in_progress(redis, keys, raw)
    entry = _entry(raw, error_class="ValueError")
    now = time.time()
    assert await _file(redis, keys, raw, keys.dead, now, entry) is True
    assert await redis.zrange(keys.dead, 0, -1) == [entry]
    assert await redis.exists(keys.in_progress(ME)) == 0
    assert await _counts(redis, keys) == (1, 1, 1, 1)


async def test_file_to_dead_trims_by_count(redis: Redis, keys: Keys) -> None:
    now = time.time()
    old = {f"old{i}".encode(): now - 100 + i for i in range(5)}
    await redis.zadd(keys.dead, old)
    raw = make_job("q")
    await _in_progress(redis, keys, raw)
    entry = _entry(raw, error_class="E")
    assert await _file(redis, keys, raw, keys.dead, now, entry, dead_max_jobs=3) is True
    # The newest three stay: the two latest old ones and the new entry.
    assert await redis.zrange(keys.dead, 0, -1) == [b"old3", b"old4", entry]


async def test_file_to_dead_trims_by_age(redis: Redis, keys: Keys) -> None:
    now = time.time()
    await redis.zadd(keys.dead, {b"ancient": now - 1000, b"recent": now - 100})
    raw = make_job("q")
    await _in_progress(redis, keys, raw)
    entry = _entry(raw, error_class="E")
    assert await _file(redis, keys, raw, keys.dead, now, entry, dead_timeout=500) is True
    assert await redis.zrange(keys.dead, 0, -1) == [b"recent", entry]


async def test_file_to_retry_does_not_trim(redis: Redis, keys: Keys) -> None:
    now = time.time()
    await redis.zadd(keys.retry, {b"r1": now - 1000, b"r2": now - 900})
    await redis.zadd(keys.dead, {b"ancient": now - 1000})
    raw = make_job("q")
    await _in_progress(redis, keys, raw)
    entry = _entry(raw)
    filed = await _file(
        redis, keys, raw, keys.retry, now + 5, entry, dead_max_jobs=1, dead_timeout=10
    )
    assert filed is True
    assert await redis.zcard(keys.retry) == 3
    assert await redis.zrange(keys.dead, 0, -1) == [b"ancient"]


async def test_file_discard(redis: Redis, keys: Keys) -> None:
    now = time.time()
    await redis.zadd(keys.dead, {b"ancient": now - 10 * 365 * DAY})
    raw = make_job("q")
    await _in_progress(redis, keys, raw)
    await redis.set(keys.orphanings(jid_of(raw)), 1)
    assert await _file(redis, keys, raw, None, now, _entry(raw), dead_max_jobs=1) is True
    assert await redis.exists(keys.in_progress(ME)) == 0
    assert await redis.exists(keys.orphanings(jid_of(raw))) == 0
    # Nothing filed, and the dead set is not trimmed by a discard either.
    assert await redis.zrange(keys.dead, 0, -1) == [b"ancient"]
    assert await redis.exists(keys.retry) == 0
    assert await _counts(redis, keys) == (1, 1, 1, 1)


async def test_file_job_not_on_list(redis: Redis, keys: Keys) -> None:
    listed, gone = make_job("q"), make_job("q")
    await _in_progress(redis, keys, listed)
    await redis.set(keys.orphanings(jid_of(gone)), 2)
    assert await _file(redis, keys, gone, keys.retry, time.time(), _entry(gone)) is False
    assert await _file(redis, keys, gone, keys.dead, time.time(), _entry(gone)) is False
    assert await redis.exists(keys.retry, keys.dead) == 0
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [listed]
    assert await redis.get(keys.orphanings(jid_of(gone))) == b"2"
    assert await _counts(redis, keys) == (0, 0, 0, 0)


async def test_file_accumulates_stats(redis: Redis, keys: Keys) -> None:
    await redis.set(keys.stats_processed, 40)
    await redis.set(keys.stats_failed, 7)
    jobs = [make_job("q") for _ in range(3)]
    await _in_progress(redis, keys, *jobs)
    for raw in jobs:
        assert await _file(redis, keys, raw, keys.retry, time.time(), _entry(raw)) is True
    assert await _counts(redis, keys) == (43, 10, 3, 3)


# --- bury.lua ---------------------------------------------------------------------


async def test_bury_replaces_entry_with_dead_entry(redis: Redis, keys: Keys) -> None:
    await redis.zadd(keys.schedule, {b"not json": 5.0, b"other": 6.0})
    dead_entry = b'{"error_class":"UnparseableJob","raw":"not json"}'
    assert await commands.bury(
        redis, keys, source=keys.schedule, entry=b"not json", dead_entry=dead_entry
    )
    assert await redis.zrange(keys.schedule, 0, -1) == [b"other"]
    dead = await redis.zrange(keys.dead, 0, -1, withscores=True)
    assert dead == [(dead_entry, pytest.approx(time.time(), abs=5))]
    day = keys.stats_failed_on(today())
    assert await redis.get(keys.stats_failed) == b"1"
    assert await redis.get(day) == b"1"
    assert DAY_STAT_TTL - 60 < await redis.ttl(day) <= DAY_STAT_TTL
    assert await redis.exists(keys.stats_processed) == 0


async def test_bury_from_retry_set(redis: Redis, keys: Keys) -> None:
    await redis.zadd(keys.retry, {b"[1]": 5.0})
    assert await commands.bury(redis, keys, source=keys.retry, entry=b"[1]", dead_entry=b"d")
    assert await redis.exists(keys.retry) == 0
    assert await redis.zrange(keys.dead, 0, -1) == [b"d"]


async def test_bury_entry_already_gone(redis: Redis, keys: Keys) -> None:
    await redis.zadd(keys.schedule, {b"other": 6.0})
    buried = await commands.bury(
        redis, keys, source=keys.schedule, entry=b"gone", dead_entry=b"dead"
    )
    assert buried is False
    assert await redis.zrange(keys.schedule, 0, -1) == [b"other"]
    assert await redis.exists(keys.dead, keys.stats_failed, keys.stats_failed_on(today())) == 0


# --- best-effort stats never fail a settlement (SPEC §4, "Redis errors") ----------


async def test_file_with_wrong_type_stats_key_still_files(redis: Redis, keys: Keys) -> None:
    raw = make_job("q")
    await _in_progress(redis, keys, raw)
    await redis.hset(keys.stats_failed, "oops", 1)
    entry = _entry(raw)
    assert await _file(redis, keys, raw, keys.retry, time.time() + 5, entry) is True
    assert await redis.zrange(keys.retry, 0, -1) == [entry]
    assert await redis.exists(keys.in_progress(ME)) == 0
    assert await redis.get(keys.stats_processed) == b"1"


async def test_bury_with_wrong_type_stats_key_still_buries(redis: Redis, keys: Keys) -> None:
    await redis.zadd(keys.schedule, {b"junk": 1.0})
    await redis.hset(keys.stats_failed, "oops", 1)
    assert await commands.bury(redis, keys, source=keys.schedule, entry=b"junk", dead_entry=b"d")
    assert await redis.zrange(keys.dead, 0, -1) == [b"d"]
