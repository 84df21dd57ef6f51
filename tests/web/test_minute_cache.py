"""The Metrics page's minute cache: every kept minute on the page, each settled one read once."""

from __future__ import annotations

import time

import pytest
import redis as sync_redis
from redis.asyncio import Redis
from starlette.testclient import TestClient

from cogworker_async import api
from cogworker_async.keys import Keys
from cogworker_async.observability.history import minute_of
from cogworker_async.web.minute_cache import KEEP_SECONDS, SETTLED_MINUTES, MinuteCache

pytestmark = pytest.mark.anyio


def _seed(r: sync_redis.Redis, keys: Keys, now: float, minutes: int) -> None:
    last = minute_of(now)
    for minute in range(last - minutes + 1, last + 1):
        r.hset(keys.history(minute), mapping={"a.job|h0": 2, "a.job|f": 1, "a.job|us": 5000})


def _hgetalls(r: sync_redis.Redis) -> int:
    stats = r.info("commandstats")
    return int(stats.get("cmdstat_hgetall", {}).get("calls", 0))


def test_the_page_offers_every_minute_kept(client: TestClient) -> None:
    page = client.get("/metrics", params={"minutes": "240"}).text
    assert "<strong>240 min</strong>" in page
    assert "in the last 240 minutes" in page


async def test_settled_minutes_are_read_once_and_match_a_full_read(
    redis: Redis, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    now = minute_of(time.time()) * 60.0 + 10  # "now + 1" stays in the same minute
    _seed(sync_client, keys, now, 240)
    cache = MinuteCache()
    first = await cache.history(redis, keys, minutes=240, now=now)
    full = await api.history(redis, keys, minutes=240, days=0, now=now)
    assert first.minutes == full.minutes
    assert first.jobs()["a.job"].runs == 240 * 3
    before = _hgetalls(sync_client)
    again = await cache.history(redis, keys, minutes=240, now=now + 1)
    assert again.minutes == full.minutes
    # Only the minutes not yet settled (the current one, the one before) are read again.
    assert _hgetalls(sync_client) - before == SETTLED_MINUTES
    # A settled minute is read again after KEEP_SECONDS (a late correction shows).
    later = now + KEEP_SECONDS + 1
    before = _hgetalls(sync_client)
    await cache.history(redis, keys, minutes=240, now=later)
    assert _hgetalls(sync_client) - before == 240


async def test_a_wrong_typed_minute_reads_as_empty(
    redis: Redis, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    now = time.time()
    _seed(sync_client, keys, now, 5)
    sync_client.delete(keys.history(minute_of(now) - 3))
    sync_client.set(keys.history(minute_of(now) - 3), "not a hash")
    found = await MinuteCache().history(redis, keys, minutes=5, now=now)
    assert [m.processed for m in found.minutes] == [3, 0, 3, 3, 3]


def test_a_jobs_own_metrics_page(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    now = time.time()
    _seed(sync_client, keys, now, 3)  # a.job: 2 fast runs and 1 failure a minute
    assert 'href="/metrics/job?name=a.job&amp;minutes=60"' in client.get("/metrics").text
    page = client.get("/metrics/job", params={"name": "a.job", "minutes": "15"})
    assert page.status_code == 200
    assert '<span class="n">9</span><span>runs</span>' in page.text
    assert '<span class="n">3</span><span>failures</span>' in page.text
    assert '<tr><td>&lt;20ms</td><td class="num">6</td></tr>' in page.text
    assert 'id="job-chart" data-unit="runs" data-series="' in page.text
    unknown = client.get("/metrics/job", params={"name": "<script>x</script>"})
    assert unknown.status_code == 200
    assert "No run of this job counted" in unknown.text
    assert "<script>x" not in unknown.text
