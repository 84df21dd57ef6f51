"""The job page (``/jobs?jid=``): its status with the progress its handler reported
(a bar), and its kept result, bounded and escaped."""

from __future__ import annotations

import re
import time

import orjson
import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.client.tracking import progress_fields
from cogworker_async.keys import Keys
from cogworker_async.web.filters import DETAIL_CLIP
from tests.lua.support import make_job

JID = "0a1b2c3d4e5f60718293a4b6"


def test_a_running_jobs_progress_is_a_bar_with_its_message(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    fields = {"state": "working", "updated_at": time.time()}
    fields.update(progress_fields(0.4, "resized <b>40</b> of 100", time.time() - 5))
    sync_client.hset(keys.status(JID), mapping=fields)
    page = client.get("/jobs", params={"jid": JID}).text
    assert '<progress id="progress" max="1" value="0.4">40%</progress> 40%' in page
    assert "resized &lt;b&gt;40&lt;/b&gt; of 100" in page  # escaped
    assert "<b>40</b>" not in page
    assert re.search(r"<span class=\"muted\">[0-9.]+s ago</span>", page)  # when it said so
    assert "<th>state</th><td>working" in page


def test_no_status_and_a_corrupt_one_are_said(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    assert "No status kept" in client.get("/jobs", params={"jid": JID}).text
    sync_client.hset(keys.status(JID), mapping={"state": "working", "progress": "lots"})
    page = client.get("/jobs", params={"jid": JID})
    assert page.status_code == 200
    assert "field &#39;progress&#39; is not a number" in page.text
    assert sync_client.hget(keys.status(JID), "progress") == b"lots"  # left as found


def test_a_finished_jobs_progress_and_its_big_result_clipped_and_escaped(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    fields = {"state": "complete", "updated_at": time.time()}
    fields.update(progress_fields(1.0, "", time.time()))
    sync_client.hset(keys.status(JID), mapping=fields)
    value = {"html": "<script>alert(1)</script>", "rows": ["x" * 100] * 2000}
    sync_client.rpush(keys.result(JID), orjson.dumps({"ok": True, "value": value}))
    response = client.get("/jobs", params={"jid": JID})
    page = response.text
    assert 'value="1.0">100%</progress> 100%' in page
    assert 'id="progress-message"' not in page  # none said
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert len(page) < DETAIL_CLIP + 20_000  # the 200 KB result is clipped


def test_the_busy_page_shows_each_running_jobs_progress(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    identity = "host:1:abc"
    sync_client.sadd(keys.processes, identity)
    sync_client.set(keys.process(identity), orjson.dumps({"busy": 3}), ex=60)
    others = ["1a1b2c3d4e5f60718293a4b6", "2a1b2c3d4e5f60718293a4b6"]
    for slot, jid in enumerate([JID, *others]):
        record = {"queue": "default", "payload": make_job(jid=jid).decode(), "run_at": 1.0}
        sync_client.hset(keys.workers(identity), str(slot), orjson.dumps(record))
    fields = {"state": "working", **progress_fields(0.25, "page <4> of 16", time.time())}
    sync_client.hset(keys.status(JID), mapping=fields)
    sync_client.hset(keys.status(others[0]), mapping={"state": "working", "progress": "x"})
    page = client.get("/busy").text
    assert '<progress max="1" value="0.25">25%</progress> 25% page &lt;4&gt; of 16' in page
    assert page.count("<progress") == 1  # none reported, or unreadable: "-"
