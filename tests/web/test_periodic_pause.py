"""Pausing and resuming a periodic entry from the web UI's periodic page."""

from __future__ import annotations

import orjson
import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.keys import Keys


def test_pause_and_resume_from_the_periodic_page(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    definition = {"name": "nightly", "job": "t.nightly", "queue": "cron", "every": 60}
    sync_client.hset(keys.periodic_entries, "nightly", orjson.dumps(definition))
    page = client.get("/periodic").text
    assert 'action="/periodic/pause"' in page
    assert '<span class="badge">paused</span>' not in page

    answer = client.post("/periodic/pause", data={"name": "nightly"})
    assert answer.status_code == 200
    assert "paused nightly" in answer.text
    assert sync_client.smembers(keys.periodic_paused) == {b"nightly"}
    page = client.get("/periodic").text
    assert '<span class="badge">paused</span>' in page
    assert 'action="/periodic/resume"' in page
    assert "already paused" in client.post("/periodic/pause", data={"name": "nightly"}).text

    answer = client.post("/periodic/resume", data={"name": "nightly"})
    assert "resumed nightly" in answer.text
    assert not sync_client.exists(keys.periodic_paused)
    assert '<span class="badge">paused</span>' not in client.get("/periodic").text

    unknown = client.post("/periodic/pause", data={"name": "nope"})
    assert unknown.status_code == 400
    assert "no periodic entry" in unknown.text
    assert not sync_client.exists(keys.periodic_paused)


def test_a_wrong_typed_paused_set_is_named_not_a_crash(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    definition = {"name": "nightly", "job": "t.nightly", "queue": "cron", "every": 60}
    sync_client.hset(keys.periodic_entries, "nightly", orjson.dumps(definition))
    sync_client.set(keys.periodic_paused, "oops")
    answer = client.post("/periodic/pause", data={"name": "nightly"})
    assert answer.status_code == 409
    assert keys.periodic_paused in answer.text
    assert sync_client.get(keys.periodic_paused) == b"oops"  # kept for the key guard
    assert "nightly" in client.get("/periodic").text  # the page still lists the entries
