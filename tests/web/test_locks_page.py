"""The Locks page: unique locks with their holders; delete one, delete the orphaned."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.api import locks as api_locks
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.web import create_app
from tests.lua.support import make_job
from tests.web.conftest import LOOPBACK


def _every_page(web: TestClient) -> str:
    """The Locks pages one after another: in a busy keyspace (the suite's shared
    server) a page may come short of the locks there are, and says where to go on."""
    text = web.get("/locks").text
    pages = [text]
    for _ in range(10_000):
        more = re.search(r'href="[^"]*/locks\?cursor=(\d+)"', text)
        if more is None:
            break
        text = web.get("/locks", params={"cursor": more.group(1)}).text
        pages.append(text)
    return "".join(pages)


def test_locks_page_lists_and_deletes(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    live = make_job("default", jid="a" * 24)
    sync_client.lpush(keys.queue("default"), live)
    sync_client.sadd(keys.queues, "default")
    sync_client.set(keys.unique("mail.send:0123"), "a" * 24, ex=600)  # holder queued
    sync_client.set(keys.unique("mail.send:4567"), "b" * 24, ex=600)  # holder nowhere
    sync_client.set(keys.unique("report:89ab"), "<script>x</script>", ex=600)
    page = _every_page(client)
    assert "a" * 24 in page
    assert "b" * 24 in page
    assert "mail.send" in page
    assert "<script>x</script>" not in page
    assert "&lt;script&gt;" in page
    answer = client.post("/locks/delete", data={"key": keys.unique("report:89ab")})
    assert answer.status_code == 200
    assert not sync_client.exists(keys.unique("report:89ab"))
    assert sync_client.exists(keys.unique("mail.send:0123"))
    client.post("/locks/delete-orphaned")
    assert sync_client.exists(keys.unique("mail.send:0123"))  # its holder is queued
    assert not sync_client.exists(keys.unique("mail.send:4567"))
    assert sync_client.lrange(keys.queue("default"), 0, -1) == [live]  # nothing else touched


def test_locks_page_read_only_and_cross_site(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.set(keys.unique("mail.send:4567"), "b" * 24, ex=600)
    with TestClient(create_app(settings, read_only=True), base_url=LOOPBACK) as ro:
        page = _every_page(ro)
        assert "b" * 24 in page
        assert "Delete" not in page
        assert ro.post("/locks/delete-orphaned").status_code == 403
    with TestClient(create_app(settings), base_url=LOOPBACK) as rw:
        refused = rw.post(
            "/locks/delete",
            data={"key": keys.unique("mail.send:4567")},
            headers={"Sec-Fetch-Site": "cross-site"},
        )
        assert refused.status_code == 403
    assert sync_client.exists(keys.unique("mail.send:4567"))


def test_locks_page_reads_one_page_at_a_time(
    client: TestClient,
    sync_client: sync_redis.Redis,
    keys: Keys,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A load reads about one page of locks, not all of them; the pages' next links
    reach every lock."""
    monkeypatch.setattr(api_locks, "LOCKS_PAGE", 30)
    holders = {f"{i:024x}" for i in range(250)}
    for holder in holders:
        sync_client.set(keys.unique(f"mail.send:{holder[-6:]}"), holder, ex=600)
    read: list[int] = []
    real_read = api_locks._read

    async def counted(*args: Any) -> Any:
        found = await real_read(*args)
        read.append(len(found))
        return found

    monkeypatch.setattr(api_locks, "_read", counted)
    seen: set[str] = set()
    url, pages = "/locks", 0
    while url:
        page = client.get(url)
        assert page.status_code == 200
        seen.update(h for h in holders if h in page.text)
        nexts = re.findall(r'href="([^"]*cursor=\d+)"', page.text)
        url = html.unescape(nexts[0]) if nexts else ""
        pages += 1
        assert pages < 50
    assert seen == holders
    assert pages >= 4
    assert max(read) <= 3 * 30  # about a page (SCAN overshoots by up to a step), never all 250
