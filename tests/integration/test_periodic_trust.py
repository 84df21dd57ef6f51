"""Periodic entries held to the core's standard (issue 21, item 3): claim keys that
stay bounded, one push per slot while two versions of an entry are live, a bad
stamp or a wrong-typed key that stops nothing but itself (and is moved aside),
misfire="skip" honoured after an outage, a tick that never holds the event loop
for long, and an entry whose queue nobody reads said so.

The real ticker and claim script against a real Redis, on a fake clock (the
ticker reads Redis's clock through ``redis_now``) so that hours pass in a test.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import subprocess
import sys
import time
from typing import Any

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Worker, current_job, job
from cogworker_async.keys import Keys
from cogworker_async.periodic import cron, every
from cogworker_async.periodic import ticker as ticker_module
from cogworker_async.periodic.entries import Entry
from cogworker_async.periodic.ticker import Ticker
from cogworker_async.periodic.timing import next_slot
from cogworker_async.settings import Settings
from tests.conftest import ROOT, child_env
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

START = 1_780_000_020.0  # a whole minute, on Redis's clock as the tests fake it


class Clock:
    """Redis's clock as the ticker reads it, moved by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, now: float) -> None:
        self.now = now
        monkeypatch.setattr(ticker_module, "redis_now", self.read)

    async def read(self, _redis: Redis) -> float:
        return self.now


async def queued(redis: Redis, keys: Keys, queue: str = "default") -> list[dict[str, Any]]:
    raw = await redis.lrange(keys.queue(queue), 0, -1)  # type: ignore[misc]
    return [orjson.loads(r) for r in raw]


async def slots(redis: Redis, keys: Keys, name: str, queue: str = "default") -> list[float]:
    return sorted(
        j["periodic_slot"] for j in await queued(redis, keys, queue) if j["periodic_pjid"] == name
    )


async def claim_ttls(redis: Redis, keys: Keys) -> list[int]:
    found = [k async for k in redis.scan_iter(match=keys.periodic("claim:*"), count=1000)]
    return [int(await redis.pttl(k)) for k in found]


def log() -> logging.Logger:
    return logging.getLogger("test.periodic.trust")


# 1. Claim keys live a few slots of the entry's interval, not ten 31-day periods.


@pytest.mark.parametrize(
    ("entry", "interval"),
    [
        (cron("* * * * * *", "t.job", name="each_second"), 1.0),
        (cron("* * * * *", "t.job", name="each_minute"), 60.0),
        (every(5, "t.job", name="every_5"), 5.0),
        (cron("0 3 * * *", "t.job", name="nightly"), 86400.0),
    ],
)
async def test_a_claim_key_lives_a_few_intervals_so_the_count_per_entry_stays_constant(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch, entry: Entry, interval: float
) -> None:
    clock = Clock(monkeypatch, START)
    ticker = Ticker(redis, keys, [entry], log())
    await ticker.tick()  # start
    for _ in range(3):
        clock.now = next_slot(entry, clock.now) + 0.5
        await ticker.tick()
    ttls = await claim_ttls(redis, keys)
    # One key per slot, and (transitional) the same claim as releases before issue
    # 21 wrote it: both bounded alike.
    assert len(ttls) == 6
    # Bounded by a few intervals (and a minute or two at most beyond that): an
    # every-second entry keeps ~a hundred keys at most, not 27 million.
    bound = max(4 * interval, 130.0) * 1000
    assert all(0 < ttl <= bound for ttl in ttls), (ttls, bound)


# 2. Two versions of an entry live at once (a rolling deploy) push each slot once.


async def test_two_versions_differing_in_anything_but_the_schedule_push_each_slot_once(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch, START)
    old = every(1, "t.job", name="tick", args=[1])
    new = every(1, "t.job", name="tick", args=[1], overlap=True, misfire="run_once")
    assert old.digest != new.digest
    tickers = [Ticker(redis, keys, [old], log()), Ticker(redis, keys, [new], log())]
    for t in tickers:
        await t.tick()
    for _ in range(10):
        clock.now += 1
        for t in tickers:
            await t.tick()
    assert await slots(redis, keys, "tick") == [START + i for i in range(1, 11)]


async def test_the_upgrade_deploy_itself_runs_each_slot_once(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process of the release before (4f321b5) claims <name>:<definition hash>:<slot>;
    # the new claim checks and writes that key too while both may be live.
    clock = Clock(monkeypatch, START)
    entry = every(1, "t.job", name="tick")
    ticker = Ticker(redis, keys, [entry], log())
    await ticker.tick()
    old_claim = keys.periodic(f"claim:tick:{entry.digest}:{int(START) + 1}")
    await redis.set(old_claim, "1", px=60_000)  # the old process won slot +1
    clock.now += 1
    assert await ticker.tick() == 0
    clock.now += 1
    assert await ticker.tick() == 1
    assert await redis.exists(keys.periodic(f"claim:tick:{entry.digest}:{int(START) + 2}"))
    assert await slots(redis, keys, "tick") == [START + 2]


async def test_a_schedule_changed_mid_deploy_runs_the_union_each_time_once(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chosen: a slot is (name, time). While every(2) and every(3) are both live,
    # both schedules run, and a time both have (every 6 s) runs once.
    clock = Clock(monkeypatch, START)
    tickers = [
        Ticker(redis, keys, [every(2, "t.job", name="tick")], log()),
        Ticker(redis, keys, [every(3, "t.job", name="tick")], log()),
    ]
    for t in tickers:
        await t.tick()
    for _ in range(12):
        clock.now += 1
        for t in tickers:
            await t.tick()
    expected = [s for s in range(int(START) + 1, int(START) + 13) if s % 2 == 0 or s % 3 == 0]
    assert await slots(redis, keys, "tick") == expected


# 3. A non-numeric last stamp: its own entry at most, logged once, moved aside.


async def test_a_bad_last_stamp_is_moved_aside_once_and_every_entry_keeps_running(
    redis: Redis,
    keys: Keys,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(monkeypatch, START)
    await redis.hset(keys.periodic("last"), "broken", "not a number")  # type: ignore[misc]
    entries = [
        every(1, "t.job", name="broken", misfire="run_once"),
        every(1, "t.job", name="fine", misfire="run_once"),
    ]
    ticker = Ticker(redis, keys, entries, log())
    with caplog.at_level(logging.INFO):
        await ticker.tick()
        for _ in range(5):
            clock.now += 1
            await ticker.tick()
            # Never a spin: the sleep is until the next slot, not a few ms.
            assert ticker.interval() > 0.5
    assert await slots(redis, keys, "fine") == [START + i for i in range(1, 6)]
    assert await slots(redis, keys, "broken") == [START + i for i in range(1, 6)]
    named = [r for r in caplog.records if "not a number" in r.getMessage()]
    assert len(named) == 1, [r.getMessage() for r in caplog.records]
    assert "broken" in named[0].getMessage()
    aside = keys.quarantine(keys.periodic("last"))
    assert await redis.hget(aside, "broken") == b"not a number"  # type: ignore[misc]
    assert await redis.ttl(aside) > 0
    # Repaired: the entry's stamp is a number again.
    assert float(await redis.hget(keys.periodic("last"), "broken")) == START + 5  # type: ignore[misc, arg-type]


async def test_a_failing_start_backs_off_instead_of_spinning(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    Clock(monkeypatch, START)
    # The definitions hash has the wrong type: publishing fails until the key
    # guard moves it aside. Meanwhile the ticker must not retry every few ms.
    await redis.set(keys.periodic("entries"), "a string where a hash belongs")
    ticker = Ticker(redis, keys, [every(1, "t.job", name="tick")], log())
    with pytest.raises(Exception, match="WRONGTYPE"):
        await ticker.tick()
    assert ticker.interval() >= 1.0


# 4. Wrong-typed keys met by a claim: moved aside, the slot still runs, no lock left.


async def test_a_wrong_typed_running_lock_is_quarantined_and_the_slot_runs(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch, START)
    lock = keys.periodic_running("locked")
    await redis.hset(lock, "a", "hash where a string belongs")  # type: ignore[misc]
    ticker = Ticker(redis, keys, [every(1, "t.job", name="locked", overlap=False)], log())
    await ticker.tick()
    clock.now += 1
    await ticker.tick()
    (job,) = await queued(redis, keys)
    assert job["periodic_slot"] == START + 1
    assert await redis.get(lock) == job["jid"].encode()
    assert await redis.type(keys.quarantine(lock)) == b"hash"


async def test_a_failed_claim_leaves_no_running_lock_behind(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch, START)
    await redis.hset(keys.queue("default"), "a", "hash where a list belongs")  # type: ignore[misc]
    ticker = Ticker(redis, keys, [every(1, "t.job", name="locked", overlap=False)], log())
    await ticker.tick()
    clock.now += 1
    # The old code raised here; what it left behind is what counts.
    with contextlib.suppress(Exception):
        await ticker.tick()
    lock = keys.periodic_running("locked")
    jobs = await queued(redis, keys) if await redis.type(keys.queue("default")) == b"list" else []
    # Either the slot ran (and holds the lock) or nothing holds it.
    holder = await redis.get(lock)
    assert holder is None or [holder.decode()] == [j["jid"] for j in jobs]
    # The queue key was moved aside and the slot pushed all the same.
    assert [j["periodic_slot"] for j in jobs] == [START + 1]
    assert await redis.type(keys.quarantine(keys.queue("default"))) == b"hash"


# 5. misfire="skip" after an outage: no catch-up; run_once: the latest missed once.


async def test_skip_after_an_outage_runs_no_missed_slot(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch, START + 0.5)
    ticker = Ticker(
        redis,
        keys,
        [cron("* * * * *", "t.job", name="minutely"), every(1, "t.job", name="secondly")],
        log(),
    )
    await ticker.tick()
    clock.now = START + 5 * 60 + 40  # Redis was away for 5 min 40 s
    await ticker.tick()
    assert await slots(redis, keys, "minutely") == []  # 12:05 is 40 s late: missed
    secondly = await slots(redis, keys, "secondly")
    assert all(clock.now - s <= 2.0 for s in secondly), secondly
    clock.now = START + 6 * 60 + 1  # the next slot, on time, runs
    await ticker.tick()
    assert await slots(redis, keys, "minutely") == [START + 6 * 60]


async def test_run_once_after_an_outage_runs_the_latest_missed_slot_once(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch, START + 0.5)
    entry = cron("* * * * *", "t.job", name="minutely", misfire="run_once")
    tickers = [Ticker(redis, keys, [entry], log()) for _ in range(2)]
    for t in tickers:
        await t.tick()
    clock.now = START + 5 * 60 + 40
    for t in tickers:
        await t.tick()
    assert await slots(redis, keys, "minutely") == [START + 5 * 60]


# 6. A tick with many due entries never holds the event loop for long.


async def test_a_tick_of_2000_due_entries_yields_to_the_event_loop(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch, START + 0.5)
    entries = [
        cron("* * * * *", "t.job", name=f"c{i}", tz="Europe/Berlin", misfire="run_once")
        for i in range(2000)
    ]
    ticker = Ticker(redis, keys, entries, log())
    await ticker.tick()
    # Three minutes on (a stalled loop, a short outage): every entry is due.
    clock.now = START + 180.5
    # The loop's own CPU time between two turns of a watcher task: what the tick
    # spends without yielding (CPU time, so a loaded machine's waits don't count).
    gaps: list[float] = []
    done = anyio.Event()

    async def watch() -> None:
        last = time.thread_time()
        while not done.is_set():
            await anyio.sleep(0)
            now = time.thread_time()
            gaps.append(now - last)
            last = now

    # A full collection of the test process's heap (hundreds of tests in) is not
    # the tick's: collected first, and the survivors set aside while it runs.
    gc.collect()
    gc.freeze()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            await anyio.sleep(0)
            await ticker.tick()
            done.set()
    finally:
        gc.unfreeze()
    assert max(gaps) < 0.1, max(gaps)
    # run_once: the missed slots collapse into the on-time one, one run each.
    assert len(await queued(redis, keys)) == 2000


# 7. A queue that no live process reads is said so, once.


async def test_an_entry_whose_queue_nobody_reads_is_logged_once_and_listed(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from cogworker_async.api.periodic_reads import periodic_list

    clock = Clock(monkeypatch, START)
    await redis.zadd(keys.live_queues, {"default": time.time()})
    entries = [
        every(1, "t.job", name="read", queue="default"),
        every(1, "t.job", name="unread", queue="nobody"),
    ]
    ticker = Ticker(redis, keys, entries, log())
    with caplog.at_level(logging.WARNING):
        await ticker.tick()
        for _ in range(3):
            clock.now += 1
            await ticker.tick()
    said = [r.getMessage() for r in caplog.records if "no live process reads" in r.getMessage()]
    assert len(said) == 1, said
    assert "'nobody'" in said[0]
    assert "unread" in said[0]
    listed = {p.name: p for p in await periodic_list(redis, keys)}
    assert listed["read"].queue_read is True
    assert listed["unread"].queue_read is False


async def test_a_wrong_typed_live_queues_key_never_stops_a_tick(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch, START)
    await redis.set(keys.live_queues, "a string where a sorted set belongs")
    ticker = Ticker(redis, keys, [every(1, "t.job", name="tick")], log())
    await ticker.tick()
    clock.now += 1
    await ticker.tick()
    assert await slots(redis, keys, "tick") == [START + 1]


# Item 7 (periodic parts): `periodic run-now` on a bad definition or an unread queue.


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


async def test_run_now_refuses_a_bad_definition_and_an_unread_queue_in_one_line(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    seconds, _ = await redis.time()
    await redis.zadd(keys.live_queues, {"default": float(seconds)})
    definition = {"name": "bad", "job": "t.job", "queue": "default", "every": 1.0, "args": 5}
    await redis.hset(keys.periodic("entries"), "bad", orjson.dumps(definition))  # type: ignore[misc]
    refused = cli(settings, "periodic", "run-now", "bad")
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: periodic entry 'bad'"), line
    assert "args" in line, line
    assert await redis.llen(keys.queue("default")) == 0  # type: ignore[misc]

    typo = {"name": "typo", "job": "t.job", "queue": "defualt", "every": 1.0, "args": []}
    await redis.hset(keys.periodic("entries"), "typo", orjson.dumps(typo))  # type: ignore[misc]
    refused = cli(settings, "periodic", "run-now", "typo")
    assert refused.returncode == 1
    (line,) = refused.stderr.strip().splitlines()
    assert "'defualt'" in line, line
    assert "no live process reads" in line, line
    assert await redis.llen(keys.queue("defualt")) == 0  # type: ignore[misc]
    forced = cli(settings, "periodic", "run-now", "typo", "--force")
    assert forced.returncode == 0, forced.stderr
    (job,) = await queued(redis, keys, "defualt")
    assert job["jid"] == forced.stdout.strip()


# Every key under the periodic prefix is known to the key guard; a running worker
# moves a wrong-typed one aside and its entry runs again.

ran: list[float] = []


@job(name="trust.locked")
async def locked_job() -> None:
    ran.append(float(current_job().payload["periodic_slot"]))


async def test_a_worker_quarantines_wrong_typed_running_locks_and_the_entry_runs(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    ran.clear()
    for name in ("every_second", "hourly"):
        await redis.hset(keys.periodic_running(name), "a", "hash where a string belongs")  # type: ignore[misc]
    entries = [
        every(1, locked_job, name="every_second", overlap=False),
        # Not due during the test: only the key guard can find its lock.
        every(3600, locked_job, name="hourly", overlap=False),
    ]
    guarded = settings.model_copy(update={"key_check_interval": 0.5})
    async with Worker(guarded, jobs=[locked_job], periodic=entries):

        async def moved() -> bool:
            kinds = [
                await redis.type(keys.quarantine(keys.periodic_running(n)))
                for n in ("every_second", "hourly")
            ]
            return kinds == [b"hash", b"hash"]

        await wait_for(moved, timeout=30)
        await wait_for(lambda: _at_least(ran, 2), timeout=30)
    assert await redis.type(keys.periodic_running("hourly")) == b"none"


async def _at_least(found: list[float], n: int) -> bool:
    return len(found) >= n
