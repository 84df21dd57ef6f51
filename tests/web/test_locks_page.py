"""The Locks page: unique locks with their holders; delete one, delete the orphaned."""

from __future__ import annotations

import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.web import create_app
from tests.lua.support import make_job


def test_locks_page_lists_and_deletes(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    live = make_job("default", jid="a" * 24)
    sync_client.lpush(keys.queue("default"), live)
    sync_client.sadd(keys.queues, "default")
    sync_client.set(keys.unique("mail.send:0123"), "a" * 24, ex=600)  # holder queued
    sync_client.set(keys.unique("mail.send:4567"), "b" * 24, ex=600)  # holder nowhere
    sync_client.set(keys.unique("report:89ab"), "<script>x</script>", ex=600)
    page = client.get("/locks").text
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
    with TestClient(create_app(settings, read_only=True)) as ro:
        page = ro.get("/locks").text
        assert "b" * 24 in page
        assert "Delete" not in page
        assert ro.post("/locks/delete-orphaned").status_code == 403
    with TestClient(create_app(settings)) as rw:
        refused = rw.post(
            "/locks/delete",
            data={"key": keys.unique("mail.send:4567")},
            headers={"Sec-Fetch-Site": "cross-site"},
        )
        assert refused.status_code == 403
    assert sync_client.exists(keys.unique("mail.send:4567"))
