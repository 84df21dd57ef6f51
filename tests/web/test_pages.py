"""Every page renders, empty or full of odd data, escapes what it shows, and stays fast to read."""

from __future__ import annotations

import pytest
import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.web import create_app
from tests.integration.test_metrics import seed_admitted
from tests.web.conftest import LOOPBACK, PAGES, SCRIPT, failed, seed_odd


@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_on_an_empty_namespace(client: TestClient, path: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text


def test_every_page_renders_odd_data_escaped(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    jobs = seed_odd(sync_client, keys)
    for path in PAGES:
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.text[:2000])
        assert SCRIPT not in answer.text, path
        assert "<b>odd</b>" not in answer.text, path
    assert "&lt;script&gt;" in client.get("/dead").text
    assert "&lt;script&gt;" in client.get("/busy").text
    assert "h&lt;i&gt;" in client.get("/busy").text
    assert "holds a string, not a list" in client.get("/queues/broken").text
    dead = client.get("/dead").text
    assert "not JSON" in dead
    assert "not a JSON object but list" in dead
    # Every entry's detail page, the unparseable ones included.
    for token in _tokens(client, "/dead"):
        detail = client.get("/dead/entry", params={"ref": token})
        assert detail.status_code == 200, token
        assert SCRIPT not in detail.text
    huge = client.get("/retries").text
    assert len(huge) < 200_000  # a huge payload is clipped, not sent whole
    assert len(jobs) == 6


def test_wrong_typed_sets_show_a_problem(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    for key in (keys.retry, keys.dead, keys.schedule, keys.queues, keys.processes, keys.paused):
        sync_client.set(key, "wrong")
    sync_client.set(keys.periodic("entries"), "wrong")
    for path in PAGES:
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.text[:2000])
    assert "holds a string, not a sorted set" in client.get("/dead").text
    assert "holds a string, not a sorted set" in client.get("/dead?q=x").text


def test_entry_detail_shows_the_job(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    raw = failed("emails.send", kwargs={"lang": "de"}, error_backtrace="Traceback: line 1")
    sync_client.zadd(keys.dead, {raw: 1_700_000_000.5})
    (token,) = _tokens(client, "/dead")
    page = client.get("/dead/entry", params={"ref": token}).text
    for text in (
        "emails.send",
        "a@b.c",
        "lang",
        "RuntimeError",
        "SMTP said no",
        "Traceback: line 1",
        "2023-11-14 22:13:20Z",
        "retry count",
    ):
        assert text in page
    gone = client.get("/dead/entry", params={"ref": "1.0~nothing"})
    assert gone.status_code == 404


def test_paging_and_search_are_bounded(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    pipe = sync_client.pipeline(transaction=False)
    for i in range(12_000):
        name = "needle.job" if i == 11_999 else "hay.job"
        pipe.zadd(keys.retry, {failed(name, n=i): float(i)})
    pipe.execute()
    first = client.get("/retries").text
    assert "page 1 of 240" in first
    assert "next →" in first
    assert "page 3 of 240" in client.get("/retries?page=3").text
    search = client.get("/retries?q=needle").text
    matches = search.count("needle.job")
    if "more →" in search:  # the bound stopped the scan before the end
        assert "entries looked at" in search
    else:
        assert matches >= 1


def test_mounted_under_a_prefix_links_stay_under_it(settings: Settings) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    # Mounted in an app served under its own name: that name is allowed.
    outer = Starlette(
        routes=[Mount("/jobs", app=create_app(settings, allowed_hosts=["testserver"]))]
    )
    with TestClient(outer) as client:
        page = client.get("/jobs/queues")
        assert page.status_code == 200
        assert 'href="/jobs/static/style.css"' in page.text
        assert 'href="/jobs/dead"' in page.text
        assert client.get("/jobs/static/app.js").status_code == 200


def test_security_headers(client: TestClient) -> None:
    answer = client.get("/")
    csp = answer.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["referrer-policy"] == "same-origin"
    assert answer.headers["server-timing"].startswith("app;dur=")
    assert "<script>" not in answer.text.replace('<script src="/static/app.js" defer></script>', "")


def _tokens(client: TestClient, path: str) -> list[str]:
    import re
    from html import unescape

    return [unescape(t) for t in re.findall(r'name="ref" value="([^"]+)"', client.get(path).text)]


def test_redis_unreachable_is_a_503_page_not_a_traceback(settings: Settings) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    away = Settings(**{**settings.model_dump(), "redis_url": f"redis://127.0.0.1:{port}/0"})
    with TestClient(create_app(away), base_url=LOOPBACK) as client:
        for path in ("/", "/dead", "/busy"):
            answer = client.get(path)
            assert answer.status_code == 503, path
            assert "Redis unreachable" in answer.text
        assert client.post("/queues/mail/pause").status_code == 503


def test_a_search_stops_at_its_bound_and_goes_on_from_more(
    client: TestClient,
    sync_client: sync_redis.Redis,
    keys: Keys,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import re
    from html import unescape

    from cogworker_async.api import browsing

    monkeypatch.setattr(browsing, "SEARCH_WORK", 500)
    pipe = sync_client.pipeline(transaction=False)
    for i in range(5_000):
        pipe.zadd(keys.dead, {failed("hay.job", n=i): float(i)})
    pipe.zadd(keys.dead, {failed("needle.job"): 99_999.0})
    pipe.execute()
    path, requests, found = "/dead?q=NEEDLE", 0, False
    while path:
        requests += 1
        page = client.get(path).text
        found = found or "needle.job" in page
        more = re.search(r'href="([^"]+)">more →', page)
        path = unescape(more.group(1)) if more else ""
    assert found
    assert requests > 1  # the bound split the scan; "more" went on where it stopped


def test_the_limits_page_shows_each_key_escaped(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.sadd(keys.limit_slots("acct:<b>"), "j1", "j2")
    sync_client.lpush(keys.limit_parked("acct:<b>"), b"{}")
    sync_client.hset(keys.limit_config, "api", "100 60000")
    sync_client.set(keys.limit_pause("api"), "1", px=90_000)
    seed_admitted(sync_client, keys, {"api": 12})
    page = client.get("/limits").text
    assert "<td>100 per 60 s</td><td>1.2</td>" in page  # admitted/s
    assert '<td class="mono">acct:&lt;b&gt;</td><td>2</td><td>1</td>' in page
    assert "<td>100 per 60 s</td>" in page
    assert "acct:<b>" not in page
    assert 'href="/limits"' in client.get("/").text  # in the navigation
