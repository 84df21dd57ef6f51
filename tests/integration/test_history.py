"""The metrics history end to end: a worker runs 10,000 jobs of three names and the
per-minute and per-day counts, run times and histograms in Redis are exact.

Exact needs a known run time and minute for every job: the processor's clock
(and the store's, which names the day and a failure's minute) is a fake that
only the jobs move, and the worker runs one job at a time, so each job's run
time is what it advanced the clock by, and its minute the clock when it ended.
Each job logs both; the expectation is built from that log.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from types import ModuleType
from typing import Any

import pytest
import redis as sync_redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, api, job
from cogworker_async.keys import Keys
from cogworker_async.observability.history import BUCKET_COUNT, bucket_of, minute_of
from cogworker_async.observability.prometheus import Metrics
from cogworker_async.store.commands import days, filing, moves, today
from cogworker_async.worker import processor
from tests.helpers import wait_for
from tests.integration.test_cli import cli

pytestmark = pytest.mark.anyio

SLOW_US = (25_000, 50_000, 120_000, 800_000, 3_000_000)  # buckets 1, 3, 5, 10, 13


class FakeTime:
    """``time`` with a clock that only ``advance`` moves (everything else the real one's)."""

    def __init__(self, start: float) -> None:
        self.now = start

    def time(self) -> float:
        return self.now

    def advance(self, us: int) -> float:
        self.now += us / 1e6
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


clock = FakeTime(0.0)
# (name, the minute it ended in, its run time in µs; None for a failure)
log: list[tuple[str, int, int | None]] = []


@job(name="hist.quick")
async def quick() -> None:
    end = clock.advance(1_000)
    log.append(("hist.quick", minute_of(end), 1_000))


@job(name="hist.slow")
async def slow(i: int) -> None:
    us = SLOW_US[i % len(SLOW_US)]
    end = clock.advance(us)
    log.append(("hist.slow", minute_of(end), us))


@job(name="hist.fail", retry=False)
async def fail() -> None:
    end = clock.advance(2_000)
    log.append(("hist.fail", minute_of(end), None))
    raise ValueError("counted, then discarded")


def _patch_clock(monkeypatch: pytest.MonkeyPatch, start: float) -> None:
    clock.now = start
    log.clear()
    # Every module whose clock the store's commands read (store/commands/).
    for module in (processor, days, filing, moves):
        assert isinstance(module.time, ModuleType)
        monkeypatch.setattr(module, "time", clock)


async def test_ten_thousand_jobs_of_three_names_counted_exactly(
    settings: Settings, redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An hour into today (UTC), far from a day's end: the run spans ~41 fake minutes.
    start = (time.time() // 86_400) * 86_400 + 3_600 + 0.5
    _patch_clock(monkeypatch, start)
    counts = {"hist.quick": 4_000, "hist.slow": 3_000, "hist.fail": 3_000}
    async with Client(settings) as client:
        # Interleaved, so each minute sees every name.
        for _ in range(10):
            await client.enqueue_many(quick, [()] * (counts["hist.quick"] // 10))
            await client.enqueue_many(slow, [(i,) for i in range(counts["hist.slow"] // 10)])
            await client.enqueue_many(fail, [()] * (counts["hist.fail"] // 10))
    one_at_a_time = settings.model_copy(update={"concurrency": 1, "metrics_history": True})
    async with Worker(one_at_a_time, jobs=[quick, slow, fail]):
        await wait_for(lambda: _processed(redis, keys, 10_000), timeout=120)
    assert Counter(name for name, _, _ in log) == counts

    expected: dict[int, dict[str, Any]] = defaultdict(
        lambda: {"processed": 0, "failed": 0, "jobs": {}}
    )
    for name, minute, us in log:
        point = expected[minute]
        point["processed"] += 1
        job_counts = point["jobs"].setdefault(name, [0, 0, 0, [0] * BUCKET_COUNT])
        job_counts[0] += 1
        if us is None:
            point["failed"] += 1
            job_counts[1] += 1
        else:
            job_counts[2] += us
            job_counts[3][bucket_of(us)] += 1
    first, last = min(expected), max(expected)
    assert last - first >= 40  # the run spans many minutes

    history = await api.history(redis, keys, minutes=last - first + 1, days=2, now=clock.now)
    assert [m.minute for m in history.minutes] == list(range(first, last + 1))
    for point in history.minutes:
        want = expected.get(point.minute, {"processed": 0, "failed": 0, "jobs": {}})
        assert (point.processed, point.failed) == (want["processed"], want["failed"]), point
        got = {
            name: [j.runs, j.failures, round(j.run_time * 1e6), list(j.histogram)]
            for name, j in point.jobs.items()
        }
        assert got == want["jobs"], point.minute

    jobs = history.jobs()
    assert jobs["hist.quick"].histogram[0] == 4_000
    assert jobs["hist.fail"].failures == jobs["hist.fail"].runs == 3_000
    assert sum(jobs["hist.fail"].histogram) == 0  # as Sidekiq: failures have no run time
    slow_buckets = {bucket_of(us): 600 for us in SLOW_US}
    assert {i: n for i, n in enumerate(jobs["hist.slow"].histogram) if n} == slow_buckets
    assert round(jobs["hist.slow"].run_time * 1e6) == 600 * sum(SLOW_US)

    # Per day: everything today (the fake clock's day), nothing yesterday.
    assert [(d.day, d.processed, d.failed) for d in history.days] == [
        (today(clock.now - 86_400), 0, 0),
        (today(clock.now), 10_000, 3_000),
    ]
    assert int(await redis.get(keys.stats_processed) or 0) == 10_000
    assert int(await redis.get(keys.stats_failed) or 0) == 3_000
    day_ttl = await redis.ttl(keys.stats_processed_on(today(clock.now)))
    assert 179 * 86_400 < day_ttl <= 180 * 86_400


async def _processed(redis: Redis, keys: Keys, total: int) -> bool:
    return int(await redis.get(keys.stats_processed) or 0) >= total


@job(name="hist.real")
async def real() -> None:
    pass


async def test_real_clock_counts_read_by_the_cli(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(real, [()] * 300)
        await client.enqueue_many(fail, [()] * 20)
    async with Worker(settings.model_copy(update={"metrics_history": True}), jobs=[real, fail]):
        await wait_for(lambda: _processed(redis, keys, 320))
    done = cli(settings, "stats", "--history", "--minutes", "5", "--days", "3", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["minutes"]) == 5
    assert sum(m["processed"] for m in data["minutes"]) == 320
    assert sum(m["failed"] for m in data["minutes"]) == 20
    assert data["jobs"]["hist.real"]["runs"] == 300
    assert data["jobs"]["hist.real"]["failures"] == 0
    assert sum(data["jobs"]["hist.real"]["histogram"]) == 300
    assert data["jobs"]["hist.fail"]["failures"] == 20
    assert data["days"][-1]["processed"] == 320
    assert len(data["buckets_ms"]) == BUCKET_COUNT - 1
    table = cli(settings, "stats", "--history", "--minutes", "3")
    assert table.returncode == 0, table.stderr
    assert "hist.real" in table.stdout
    assert "per day (UTC)" in table.stdout


async def test_history_off_writes_no_history(settings: Settings, redis: Redis, keys: Keys) -> None:
    async with Client(settings) as client:
        await client.enqueue_many(real, [()] * 50)
        await client.enqueue_many(fail, [()] * 5)
    assert not settings.metrics_history  # off by default
    async with Worker(settings, jobs=[real, fail]):
        await wait_for(lambda: _processed(redis, keys, 55))
    assert await redis.keys(keys.history_prefix + "*") == []
    # The day counters are not part of the switch: stats always had them.
    assert int(await redis.get(keys.stats_processed_on(today())) or 0) == 55


async def test_an_unparseable_job_counts_in_the_minute_without_a_name(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    await redis.lpush(keys.queue("default"), b"{not json")
    await redis.sadd(keys.queues, "default")
    async with Worker(settings.model_copy(update={"metrics_history": True}), jobs=[real]):
        await wait_for(lambda: _processed(redis, keys, 1))
    history = await api.history(redis, keys, minutes=2, days=1)
    assert sum(m.failed for m in history.minutes) == 1
    assert sum(m.processed for m in history.minutes) == 1
    assert history.jobs() == {}


def test_prometheus_reads_the_last_complete_minute(settings: Settings, keys: Keys) -> None:
    client = sync_redis.Redis.from_url(settings.redis_url)
    metrics = Metrics(settings, registry=CollectorRegistry())
    try:
        for _ in range(3):  # again if a minute began meanwhile
            last = minute_of(time.time()) - 1
            client.delete(*(keys.history(m) for m in (last - 1, last, last + 1)))
            client.hset(
                keys.history(last),
                mapping={
                    "mail.send|h0": 3,
                    "mail.send|h2": 1,
                    "mail.send|us": 2_500_000,
                    "mail.send|f": 2,
                },
            )
            client.hset(keys.history(last + 1), mapping={"mail.send|h0": 99})  # not complete
            client.set(keys.history(last - 1), "wrong type: reads as nothing")
            body = generate_latest(metrics.registry).decode()
            if minute_of(time.time()) - 1 == last:
                break
    finally:
        metrics.close()
        client.close()
    samples = {
        (s.name, tuple(s.labels.values())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("cogworker_job_last_minute_runs", ("mail.send",))] == 6
    assert samples[("cogworker_job_last_minute_failures", ("mail.send",))] == 2
    assert samples[("cogworker_job_last_minute_run_seconds", ("mail.send",))] == 2.5
    assert samples[("cogworker_last_minute_processed", ())] == 6
    assert samples[("cogworker_last_minute_failed", ())] == 2


async def test_api_history_shapes_caps_and_bad_data(redis: Redis, keys: Keys) -> None:
    now = 1_800_000_030.0  # half a minute into minute 30,000,000
    await redis.hset(keys.history(30_000_000), mapping={"a|h0": 2, "a|f": 1})
    await redis.set(keys.history(29_999_999), "not a hash")
    await redis.set(keys.stats_processed_on(today(now)), "corrupt")
    await redis.set(keys.stats_failed_on(today(now)), 4)
    history = await api.history(redis, keys, minutes=3, days=2, now=now)
    assert [m.minute for m in history.minutes] == [29_999_998, 29_999_999, 30_000_000]
    assert [(m.processed, m.failed) for m in history.minutes] == [(0, 0), (0, 0), (3, 1)]
    assert history.minutes[-1].at == 1_800_000_000.0
    assert [(d.processed, d.failed) for d in history.days] == [(0, 0), (0, 4)]
    assert history.jobs()["a"].mean_run_time == 0.0
    capped = await api.history(redis, keys, minutes=10_000, days=10_000, now=now)
    assert len(capped.minutes) == api.MAX_MINUTES == 240
    assert len(capped.days) == api.MAX_DAYS == 180
    empty = await api.history(redis, keys, minutes=0, days=0, now=now)
    assert (empty.minutes, empty.days) == ([], [])
    with pytest.raises(ValueError, match=">= 0"):
        await api.history(redis, keys, minutes=-1)
