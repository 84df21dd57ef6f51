"""The real ticker and claim script on a fake clock. DST in a named zone:
Europe/Berlin ``30 2 * * *`` fires exactly once on the fall-back day (at the first
02:30, CEST) and once on the spring-forward day (at 03:00 CEST, the end of the gap),
as cronsim (Debian cron's rules) says; two tickers on the same clock push each once.
Many due entries: claimed in one pipeline per tick."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.periodic import claims as claims_module
from cogworker_async.periodic import cron, every
from cogworker_async.periodic import ticker as ticker_module
from cogworker_async.periodic.ticker import Ticker

pytestmark = pytest.mark.anyio


def utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()  # type: ignore[misc]


async def run_day(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch, start: float, hours: int
) -> list[float]:
    """Tick two processes every 10 minutes of fake time over ``hours``; the slots pushed."""
    clock = [start]

    async def fake_now(_redis: Redis) -> float:
        return clock[0]

    monkeypatch.setattr(ticker_module, "redis_now", fake_now)
    entry = cron("30 2 * * *", "dst.job", tz="Europe/Berlin", name="nightly")
    log = logging.getLogger("test.dst")
    tickers = [Ticker(redis, keys, [entry], log) for _ in range(2)]
    for t in tickers:
        await t.tick()  # start: publish, nothing missed (a new entry)
    while clock[0] < start + hours * 3600:
        clock[0] += 600
        for t in tickers:
            await t.tick()
    queued = await redis.lrange(keys.queue("default"), 0, -1)  # type: ignore[misc]
    return sorted(orjson.loads(raw)["periodic_slot"] for raw in queued)


async def test_fall_back_day_fires_once_at_the_first_0230(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2026-10-25: 03:00 CEST becomes 02:00 CET, so 02:30 is on the wall clock twice.
    slots = await run_day(redis, keys, monkeypatch, utc(2026, 10, 24, 20, 0), 12)
    assert slots == [utc(2026, 10, 25, 0, 30)]  # 02:30 CEST, not 02:30 CET (01:30 UTC)


async def test_spring_forward_day_fires_once_at_0300(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    slots = await run_day(redis, keys, monkeypatch, utc(2026, 3, 28, 20, 0), 12)
    assert slots == [utc(2026, 3, 29, 1, 0)]  # 03:00 CEST


async def test_ordinary_days_around_the_change_fire_daily(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    slots = await run_day(redis, keys, monkeypatch, utc(2026, 10, 23, 20, 0), 72)
    assert slots == [
        utc(2026, 10, 24, 0, 30),  # CEST
        utc(2026, 10, 25, 0, 30),  # CEST, the fall-back day
        utc(2026, 10, 26, 1, 30),  # CET
    ]


async def test_many_due_entries_are_claimed_in_one_pipeline_once(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [utc(2026, 6, 1, 12, 0) + 0.5]

    async def fake_now(_redis: Redis) -> float:
        return clock[0]

    monkeypatch.setattr(ticker_module, "redis_now", fake_now)
    calls: list[int] = []
    real = claims_module.claim_slots

    async def counted(redis_: Redis, keys_: Keys, batch: Any) -> list[Any]:
        calls.append(len(batch))
        return await real(redis_, keys_, batch)

    monkeypatch.setattr(claims_module, "claim_slots", counted)
    entries = [every(60, "many.job", name=f"e{i}", overlap=i % 2 == 0) for i in range(30)]
    log = logging.getLogger("test.many")
    first, second = Ticker(redis, keys, entries, log), Ticker(redis, keys, entries, log)
    await first.tick()
    await second.tick()
    clock[0] += 60
    assert await first.tick() == 30
    assert await second.tick() == 0  # every slot already claimed
    assert calls == [30, 30]  # one round trip per tick, whatever the number due
    queued = [orjson.loads(r) for r in await redis.lrange(keys.queue("default"), 0, -1)]  # type: ignore[misc]
    assert sorted(j["periodic_pjid"] for j in queued) == sorted(f"e{i}" for i in range(30))
    locked = sorted(j["periodic_pjid"] for j in queued if j.get("periodic_until_executed"))
    assert locked == sorted(f"e{i}" for i in range(1, 30, 2))  # overlap=False: the odd ones
