"""The Metrics page: per-minute chart and per-job table from the metrics history, read only."""

from __future__ import annotations

import asyncio
import re
import time

import redis as sync_redis
from redis.asyncio import Redis
from starlette.testclient import TestClient

from cogworker_async import Client, Worker, job
from cogworker_async.keys import Keys
from cogworker_async.observability.history import minute_of
from cogworker_async.settings import Settings
from cogworker_async.web import create_app
from tests.helpers import wait_for
from tests.web.conftest import LOOPBACK, SCRIPT, seed_odd

NO_HISTORY = "No metrics history in the last"


@job(name="metrics.ok")
async def ok() -> None:
    pass


@job(name="metrics.bad", retry=False)
async def bad() -> None:
    raise ValueError("counted as a failure")


@job(name=SCRIPT)
async def evil() -> None:
    pass


def run_worker(settings: Settings, counts: dict[object, int]) -> None:
    """Enqueue ``counts`` jobs of each and run a worker with the history on until all are done."""
    total = sum(counts.values())

    async def main() -> None:
        async with Client(settings) as client:
            for fn, n in counts.items():
                await client.enqueue_many(fn, [()] * n)  # type: ignore[call-overload]
        redis = Redis.from_url(settings.redis_url)
        keys = Keys(settings.namespace)

        async def done() -> bool:
            return int(await redis.get(keys.stats_processed) or 0) >= total

        try:
            history_on = settings.model_copy(update={"metrics_history": True})
            async with Worker(history_on, jobs=[ok, bad, evil]):
                await wait_for(done)
        finally:
            await redis.aclose()

    asyncio.run(main())


def row(page: str, name: str) -> list[str]:
    """The cells of the job table's row for ``name`` (as escaped in the page)."""
    match = re.search(
        rf"<tr><td>(?:<a [^>]*>)?{re.escape(name)}(?:</a>)?</td>(.*?)</tr>", page, re.S
    )
    assert match, name
    return re.findall(r'<td class="num">(.*?)</td>', match.group(1))


def test_empty_namespace_says_there_is_no_history(client: TestClient) -> None:
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert NO_HISTORY in answer.text
    assert "metrics_history=True" in answer.text
    assert "no job counted" in answer.text
    assert 'href="/metrics"' in answer.text  # in the navigation bar
    for minutes in ("0", "-3", "99999", "x"):
        assert client.get("/metrics", params={"minutes": minutes}).status_code == 200
    # Every minute kept can be asked for (240), no more.
    assert "<strong>240 min</strong>" in client.get("/metrics", params={"minutes": "240"}).text
    assert "in the last 240 minutes" in client.get("/metrics", params={"minutes": "99999"}).text
    assert "in the last 1 minutes" in client.get("/metrics", params={"minutes": "0"}).text


def test_history_off_says_so(client: TestClient, settings: Settings) -> None:
    async def main() -> None:
        async with Client(settings) as c:
            await c.enqueue_many(ok, [()] * 5)
        redis = Redis.from_url(settings.redis_url)
        keys = Keys(settings.namespace)

        async def done() -> bool:
            return int(await redis.get(keys.stats_processed) or 0) >= 5

        async with Worker(settings, jobs=[ok]):
            await wait_for(done)
        await redis.aclose()

    asyncio.run(main())
    assert NO_HISTORY in client.get("/metrics").text


def test_a_worker_with_history_on_fills_the_table(client: TestClient, settings: Settings) -> None:
    run_worker(settings, {ok: 30, bad: 10, evil: 2})
    answer = client.get("/metrics", params={"minutes": "5"})
    assert answer.status_code == 200
    page = answer.text
    assert NO_HISTORY not in page
    runs, failures, pct, *_ = row(page, "metrics.ok")
    assert (runs, failures, pct) == ("30", "0", "0.0")
    runs, failures, pct, _total, mean, p50, p95 = row(page, "metrics.bad")
    assert (runs, failures, pct) == ("10", "10", "100.0")
    assert (mean, p50, p95) == ("-", "-", "-")  # run times count successful runs only
    assert "processed 42" in page
    assert "failed 10" in page
    # The job name is text, never markup; and the page offers no action.
    assert SCRIPT not in page
    assert "&lt;script&gt;" in page
    assert row(page, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;")[0] == "2"
    assert 'method="post"' not in page  # reads only (the nav's jid search is a GET)
    assert "<script>" not in page.replace('<script src="/static/app.js" defer></script>', "")
    # The page says what it cost; the budget itself is measured in bench/web_pages.py.
    # Here only a gross regression (a scan of every job, say) fails: a busy machine
    # took 259 ms for this page.
    assert float(answer.headers["server-timing"].split("dur=")[1]) < 2000


def test_odd_history_data_renders(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    seed_odd(sync_client, keys)
    now = minute_of(time.time())
    sync_client.set(keys.history(now), "a string where a hash belongs")
    sync_client.hset(
        keys.history(now - 1),
        mapping={
            "a|f": "not a number",
            "a|h0": "-7",
            "a|h99": "5",
            "b|us": "1" * 400,  # too big for a float
            "no separator": "1",
            SCRIPT + "|h3": "4",
        },
    )
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text[:2000]
    assert SCRIPT not in answer.text
    assert "metrics history unreadable" in answer.text  # the run time too big to show
    sync_client.hset(keys.history(now - 1), "b|us", "12")
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert SCRIPT not in answer.text
    assert "&lt;script&gt;" in answer.text


def test_read_only_app_renders_it(settings: Settings) -> None:
    with TestClient(create_app(settings, read_only=True), base_url=LOOPBACK) as ro:
        assert ro.get("/metrics").status_code == 200
