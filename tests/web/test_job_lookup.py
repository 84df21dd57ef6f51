"""Finding a job by jid from the nav's search box: wherever it is, with its kept result."""

from __future__ import annotations

import orjson
import pytest
import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.api import lookup
from cogworker_async.keys import Keys
from tests.lua.support import make_job

JID = "0a1b2c3d4e5f60718293a4b5"


def test_a_jid_is_found_in_a_queue_and_the_dead_set_with_links(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.sadd(keys.queues, "mail")
    sync_client.lpush(keys.queue("mail"), make_job("mail", jid=JID), make_job("mail"))
    sync_client.zadd(keys.dead, {make_job("mail", jid=JID, error_class="E"): 1_700_000_000.5})
    sync_client.zadd(keys.dead, {make_job("mail"): 1_700_000_001})
    page = client.get("/jobs", params={"jid": JID}).text
    assert 'href="/queues/mail">mail</a>, position 2 from the newest' in page
    assert 'href="/dead/entry?ref=1700000000.5~' + JID in page
    assert "No result kept" in page
    assert 'action="/jobs"' in client.get("/").text  # the search box in the nav


def test_a_running_job_and_its_result(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    identity = "host:1:abc"
    sync_client.sadd(keys.processes, identity)
    sync_client.set(keys.process(identity), orjson.dumps({"busy": 1}), ex=60)
    record = {"queue": "default", "payload": make_job(jid=JID).decode(), "run_at": 1.0}
    sync_client.hset(keys.workers(identity), "0", orjson.dumps(record))
    sync_client.rpush(keys.result(JID), orjson.dumps({"ok": True, "value": {"sent": 3}}))
    page = client.get("/jobs", params={"jid": JID}).text
    assert "<td>running</td>" in page
    assert "host:1:abc" in page
    assert "&#34;sent&#34;: 3" in page or "&quot;sent&quot;: 3" in page


def test_an_unknown_jid_and_a_bad_one(client: TestClient) -> None:
    assert "Not in any queue, set or running job" in client.get("/jobs?jid=nope123").text
    bad = client.get("/jobs", params={"jid": "<script>"})
    assert bad.status_code == 400
    assert "not a jid" in bad.text
    assert "<script>" not in bad.text


def test_the_look_is_bounded(
    client: TestClient,
    sync_client: sync_redis.Redis,
    keys: Keys,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lookup, "LOOKUP_WORK", 100)
    monkeypatch.setattr(lookup, "QUEUE_WINDOW", 50)
    sync_client.sadd(keys.queues, "big")
    sync_client.lpush(
        keys.queue("big"), make_job("big", jid=JID), *[make_job("big") for _ in range(300)]
    )
    page = client.get("/jobs", params={"jid": JID}).text
    assert "Too big to look through entirely: queues" in page  # it sits past the first 100
    assert "Not in any queue" in page


def test_a_dead_entrys_page_shows_its_kept_failure(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.zadd(keys.dead, {make_job("mail", jid=JID): 1_700_000_000.5})
    failure = {"ok": False, "error_class": "SMTPError", "error_message": "mailbox full"}
    sync_client.rpush(keys.result(JID), orjson.dumps(failure))
    page = client.get("/dead/entry", params={"ref": f"1700000000.5~{JID}"}).text
    assert '<td id="result"><b>SMTPError</b>: mailbox full</td>' in page
    assert f'href="/jobs?jid={JID}"' in page


def test_each_place_found_shows_its_lifecycle_state(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.zadd(keys.retry, {make_job(jid=JID, retry_count=1): 1_700_000_000})
    sync_client.zadd(keys.schedule, {make_job(jid=JID): 1_700_000_000})
    page = client.get("/jobs", params={"jid": JID}).text
    assert '<td>retrying <span class="muted">(status retrying)</span></td>' in page
    assert '<td>scheduled <span class="muted">(status scheduled)</span></td>' in page


def test_a_job_held_by_a_limit_is_found_with_its_key(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    held = make_job(jid=JID, limits=[["concurrency", "acct:<7>", 1]], limit_slots=["acct:<7>"])
    sync_client.lpush(keys.limit_parked("acct:<7>"), held, make_job())
    page = client.get("/jobs", params={"jid": JID}).text
    assert "<td>held</td>" in page
    assert "held by the limit acct:&lt;7&gt;, position 2 from the newest" in page


def test_a_job_waiting_on_others_and_what_it_waits_on(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    pre = "1" * 24
    sync_client.hset(keys.after_waiting, JID, make_job(jid=JID, after={pre: "fail"}))
    sync_client.hset(keys.after_left, JID, 1)
    sync_client.sadd(keys.after_edges(pre), JID)
    page = client.get("/jobs", params={"jid": JID}).text
    assert "<td>after</td><td>waiting" in page
    assert "waiting on other jobs" in page
    assert f'<td id="waiting-on"><a class="mono" href="/jobs?jid={pre}">{pre}</a></td>' in page
