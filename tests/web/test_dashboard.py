"""The dashboard (issue 25, item 6): a cheap HEAD, a Busy card, a feed for the live charts."""

from __future__ import annotations

import time

import orjson
import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store.commands import day_name
from cogworker_async.web import create_app
from tests.web.conftest import LOOPBACK


def _beating(r: sync_redis.Redis, keys: Keys, identity: str, busy: int) -> None:
    """A process as its heartbeat leaves it: listed, with a presence key saying ``busy``."""
    r.sadd(keys.processes, identity)
    r.set(keys.process(identity), orjson.dumps({"hostname": "h", "pid": 1, "busy": busy}), ex=60)


def test_head_of_the_dashboard_answers_without_reading_redis(settings: Settings) -> None:
    # Nothing listens on port 1: a HEAD that read the dashboard's data would be a 503.
    unreachable = Settings(redis_url="redis://127.0.0.1:1/0", namespace=settings.namespace)
    with TestClient(create_app(unreachable), base_url=LOOPBACK) as client:
        answer = client.head("/")
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/html")
        assert answer.headers["content-security-policy"]
        assert client.get("/").status_code == 503  # the page itself still reads


def test_the_busy_card_counts_the_jobs_the_live_processes_run(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    _beating(sync_client, keys, "host:1:aaa", busy=3)
    _beating(sync_client, keys, "host:2:bbb", busy=2)
    sync_client.sadd(keys.processes, "host:3:gone")  # listed, no presence key: not counted
    page = client.get("/").text
    assert '<span class="n" data-stat="busy">5</span><span>busy</span>' in page
    assert client.get("/stats.json").json()["busy"] == 5


def test_the_feed_carries_todays_counters_for_the_per_day_chart(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    today = day_name(int(time.time() // 86_400))
    sync_client.set(keys.stats_processed_on(today), 41)
    sync_client.set(keys.stats_failed_on(today), 2)
    feed = client.get("/stats.json").json()
    assert feed["today"] == {"day": today, "processed": 41, "failed": 2}
    page = client.get("/").text
    assert 'id="per-day" data-chart="' in page
    assert '<span data-today="processed">41</span>' in page


def _connections_made(r: sync_redis.Redis) -> int:
    return int(r.info("stats")["total_connections_received"])


def test_polls_read_through_the_apps_one_shared_pool(
    settings: Settings, sync_client: sync_redis.Redis
) -> None:
    with TestClient(create_app(settings), base_url=LOOPBACK) as client:
        assert client.get("/stats.json").status_code == 200  # the pool's first connection
        before = _connections_made(sync_client)
        for _ in range(10):
            assert client.get("/stats.json").status_code == 200
        assert client.get("/").status_code == 200
        # Sequential requests reuse the pooled connection: no connect per poll.
        assert _connections_made(sync_client) - before == 0


def test_the_feed_carries_the_queue_table_as_text_and_links(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    hostile = "<img src=x onerror=alert(1)>/../victim"
    for name, size in (("mail", 2), (hostile, 1)):
        sync_client.sadd(keys.queues, name)
        for i in range(size):
            sync_client.lpush(keys.queue(name), orjson.dumps({"jid": f"j{i}", "class": "x"}))
    answer = client.get("/stats.json")
    assert answer.headers["content-type"] == "application/json"
    # The body never holds markup: < > & travel as \u escapes, the same JSON parsed.
    assert b"<" not in answer.content
    assert b">" not in answer.content
    assert b"\\u003cimg" in answer.content
    rows = {row["name"]: row for row in answer.json()["queues"]}
    assert rows["mail"]["size"] == 2
    assert rows["mail"]["href"] == "/queues/mail"
    assert rows["mail"]["paused"] is False
    assert isinstance(rows["mail"]["latency"], str)
    # A name as plain text for the page's textContent; its link one encoded segment.
    odd = rows[hostile]
    assert odd["size"] == 1
    assert odd["href"] in (
        None,
        "/queues/%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E%2F..%2Fvictim",
    )


def test_the_feed_links_under_the_prefix_the_ui_is_mounted_at(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    sync_client.sadd(keys.queues, "mail")
    sync_client.lpush(keys.queue("mail"), orjson.dumps({"jid": "j", "class": "x"}))
    outer = Starlette(routes=[Mount("/jobs", app=create_app(settings))])
    with TestClient(outer, base_url=LOOPBACK) as client:
        (row,) = client.get("/jobs/stats.json").json()["queues"]
    assert row["href"] == "/jobs/queues/mail"
