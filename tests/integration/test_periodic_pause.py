"""Pausing a periodic entry at run time (issue 25 §6): a paused entry's slots are
skipped by every ticker (not kept for later) until resumed; ``periodic pause`` /
``resume`` / ``list`` from the CLI."""

from __future__ import annotations

import logging
import subprocess
import sys
from datetime import UTC, datetime

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import api
from cogworker_async.keys import Keys
from cogworker_async.periodic import every
from cogworker_async.periodic import ticker as ticker_module
from cogworker_async.periodic.ticker import Ticker
from cogworker_async.settings import Settings
from tests.conftest import ROOT, child_env

pytestmark = pytest.mark.anyio


async def _slots(redis: Redis, keys: Keys, name: str) -> list[float]:
    queued = [orjson.loads(r) for r in await redis.lrange(keys.queue("default"), 0, -1)]  # type: ignore[misc]
    return sorted(j["periodic_slot"] for j in queued if j["periodic_pjid"] == name)


async def test_a_paused_entrys_slots_are_skipped_by_every_ticker_until_resumed(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    start = datetime(2026, 6, 1, 12, 0, tzinfo=UTC).timestamp() + 0.5
    clock = [start]

    async def fake_now(_redis: Redis) -> float:
        return clock[0]

    monkeypatch.setattr(ticker_module, "redis_now", fake_now)
    paused = every(60, "paused.job", name="paused", misfire="run_once")
    other = every(60, "other.job", name="other")
    log = logging.getLogger("test.pause")
    tickers = [Ticker(redis, keys, [paused, other], log) for _ in range(2)]
    for t in tickers:
        await t.tick()  # start: publish
    assert await api.pause_periodic(redis, keys, "paused") is True
    assert await api.pause_periodic(redis, keys, "paused") is False  # already paused
    caplog.set_level(logging.INFO, logger="test.pause")
    for minute in (1, 2, 3):
        clock[0] = start + 60 * minute
        for t in tickers:
            await t.tick()
    assert await _slots(redis, keys, "paused") == []  # three slots passed, none pushed
    assert len(await _slots(redis, keys, "other")) == 3  # the other entry runs on
    assert "Periodic entry paused is paused" in caplog.text
    (listed,) = [e for e in await api.periodic_entries(redis, keys) if e.name == "paused"]
    assert listed.paused

    assert await api.resume_periodic(redis, keys, "paused") is True
    assert await api.resume_periodic(redis, keys, "paused") is False
    clock[0] = start + 60 * 4
    for t in tickers:
        await t.tick()
    # Only the slot after the resume runs, once: the skipped ones are not caught up,
    # not even with misfire="run_once".
    assert await _slots(redis, keys, "paused") == [start - 0.5 + 240]
    assert "Periodic entry paused is resumed" in caplog.text
    (listed,) = [e for e in await api.periodic_entries(redis, keys) if e.name == "paused"]
    assert not listed.paused


async def test_a_process_starting_while_paused_catches_nothing_up(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = datetime(2026, 6, 1, 12, 0, tzinfo=UTC).timestamp() + 0.5
    clock = [start]

    async def fake_now(_redis: Redis) -> float:
        return clock[0]

    monkeypatch.setattr(ticker_module, "redis_now", fake_now)
    entry = every(60, "late.job", name="late", misfire="run_once")
    log = logging.getLogger("test.pause")
    first = Ticker(redis, keys, [entry], log)
    await first.tick()
    clock[0] += 60
    await first.tick()  # one slot run: the entry's last slot is recorded
    assert len(await _slots(redis, keys, "late")) == 1
    await api.pause_periodic(redis, keys, "late")
    clock[0] += 600  # ten slots missed while no process ran
    await Ticker(redis, keys, [entry], log).tick()  # start: run_once would catch one up
    assert len(await _slots(redis, keys, "late")) == 1


async def test_unknown_names_are_refused(redis: Redis, keys: Keys) -> None:
    assert await api.pause_periodic(redis, keys, "nope") is None
    assert await api.resume_periodic(redis, keys, "nope") is None
    assert not await redis.exists(keys.periodic_paused)


def cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogworker_async", *args],
        cwd=ROOT,
        env=child_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_pause_resume_and_list_from_the_cli(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    definition = {"name": "nightly", "job": "t.nightly", "queue": "cron", "every": 60}
    await redis.hset(keys.periodic_entries, "nightly", orjson.dumps(definition))

    paused = cli(settings, "periodic", "pause", "nightly")
    assert (paused.returncode, paused.stdout.strip()) == (0, "paused nightly"), paused.stderr
    assert await redis.smembers(keys.periodic_paused) == {b"nightly"}  # type: ignore[misc]
    again = cli(settings, "periodic", "pause", "nightly")
    assert again.stdout.strip() == "nightly was already paused"
    listed = cli(settings, "periodic", "list", "--json")
    (entry,) = orjson.loads(listed.stdout)
    assert entry["paused"] is True
    assert cli(settings, "periodic", "list").stdout.startswith("nightly (paused)\t")

    resumed = cli(settings, "periodic", "resume", "nightly")
    assert (resumed.returncode, resumed.stdout.strip()) == (0, "resumed nightly"), resumed.stderr
    assert not await redis.exists(keys.periodic_paused)
    (entry,) = orjson.loads(cli(settings, "periodic", "list", "--json").stdout)
    assert entry["paused"] is False

    unknown = cli(settings, "periodic", "pause", "nope")
    assert unknown.returncode == 1
    assert "no periodic entry named 'nope'" in unknown.stderr
