"""Every action does what it says and nothing else; cross-site, read-only and auth refuse."""

from __future__ import annotations

import asyncio
import base64
import re
from html import unescape
from typing import Any
from urllib.parse import unquote_plus

import httpx
import orjson
import pytest
import redis as sync_redis
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.testclient import TestClient

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.web import basic_auth, create_app
from tests.lua.support import jid_of, make_job
from tests.web.conftest import LOOPBACK, PAGES, failed, seed_odd


def tokens(client: TestClient, path: str) -> list[str]:
    page = client.get(path).text
    return [unescape(t) for t in re.findall(r'name="ref" value="([^"]+)"', page)]


def snapshot(r: sync_redis.Redis, keys: Keys) -> dict[str, Any]:
    """Everything in the namespace, by key: what an action must leave alone."""
    out: dict[str, Any] = {}
    for key in sorted(r.scan_iter(match=f"{keys.ns}:*")):
        kind = r.type(key).decode()
        if kind == "list":
            out[key] = r.lrange(key, 0, -1)
        elif kind == "zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        elif kind == "set":
            out[key] = sorted(r.smembers(key))
        elif kind == "hash":
            out[key] = r.hgetall(key)
        else:
            out[key] = r.get(key)
    return out


def changed(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    names = set(before) | set(after)
    return {k.decode() for k in names if before.get(k) != after.get(k)}


def test_retry_now_moves_the_selected_entry_and_nothing_else(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    one, two = failed(), failed("emails.other")
    sync_client.zadd(keys.dead, {one: 1.0, two: 2.0})
    before = snapshot(sync_client, keys)
    token = next(t for t in tokens(client, "/dead") if jid_of(one) in t)
    answer = client.post("/dead/action", data={"action": "retry", "ref": token})
    assert answer.status_code == 200
    assert "moved 1 onto their queues" in answer.text
    assert sync_client.zrange(keys.dead, 0, -1) == [two]
    (queued,) = sync_client.lrange(keys.queue("mail"), 0, -1)
    assert orjson.loads(queued)["jid"] == jid_of(one)
    assert orjson.loads(queued)["retry_count"] == 3
    after = snapshot(sync_client, keys)
    assert changed(before, after) <= {
        keys.dead,
        keys.queue("mail"),
        keys.queues,
        keys.wakeup("mail"),
    }


def test_delete_and_kill(client: TestClient, sync_client: sync_redis.Redis, keys: Keys) -> None:
    a, b = failed(), failed("emails.b")
    sync_client.zadd(keys.retry, {a: 1.0, b: 2.0})
    ta, tb = tokens(client, "/retries")
    assert "deleted 1" in client.post("/retries/action", data={"action": "delete", "ref": ta}).text
    assert sync_client.zrange(keys.retry, 0, -1) == [b]
    assert (
        "moved 1 to dead" in client.post("/retries/action", data={"action": "kill", "ref": tb}).text
    )
    assert sync_client.zcard(keys.retry) == 0
    (dead,) = sync_client.zrange(keys.dead, 0, -1)
    assert orjson.loads(dead)["jid"] == jid_of(b)
    # A second kill of the same entry finds it gone and changes nothing.
    again = client.post("/retries/action", data={"action": "kill", "ref": tb})
    assert "moved 0 to dead" in again.text
    assert sync_client.zcard(keys.dead) == 1
    assert client.post("/dead/action", data={"action": "kill", "ref": tb}).status_code == 400


def test_all_matching_a_search(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    jobs = [failed("emails.send", n=i) for i in range(5)] + [failed("reports.build", n=9)]
    sync_client.zadd(keys.dead, {raw: float(i) for i, raw in enumerate(jobs)})
    answer = client.post("/dead/action", data={"action": "retry", "all": "1", "q": "EMAILS"})
    assert "moved 5 onto their queues" in answer.text
    assert sync_client.zrange(keys.dead, 0, -1) == [jobs[-1]]
    assert sync_client.llen(keys.queue("mail")) == 5
    client.post("/dead/action", data={"action": "delete", "all": "1", "q": ""})
    assert sync_client.zcard(keys.dead) == 0


def test_unparseable_entries_stay_when_retried(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    seed_odd(sync_client, keys)
    before = sync_client.zcard(keys.dead)
    client.post("/dead/action", data={"action": "retry", "ref": tokens(client, "/dead")})
    # The three runnable entries moved; garbage, an array and a job without a queue stay.
    assert sync_client.zcard(keys.dead) == before - 3
    assert "not JSON" in client.get("/dead").text


def test_queue_pause_resume_clear_delete(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    jobs = [make_job("mail", args=[i]) for i in range(3)]
    sync_client.lpush(keys.queue("mail"), *jobs)
    sync_client.sadd(keys.queues, "mail")
    client.post("/queues/mail/pause")
    assert sync_client.smembers(keys.paused) == {b"mail"}
    assert "paused" in client.get("/queues").text
    client.post("/queues/mail/resume")
    assert sync_client.smembers(keys.paused) == set()
    # Delete one job from the window (oldest first view): only that one goes.
    page = client.get("/queues/mail?order=oldest").text
    ref = unescape(re.findall(r'name="ref" value="([^"]+)"', page)[0])
    index = re.findall(r'name="index" value="(\d+)"', page)[0]
    client.post("/queues/mail/delete", data={"ref": ref, "index": index, "order": "oldest"})
    assert sync_client.lrange(keys.queue("mail"), 0, -1) == [jobs[2], jobs[1]]
    # Clear needs the queue's name typed.
    refused = client.post("/queues/mail/clear", data={"confirm": "nope"})
    assert refused.status_code == 400
    assert sync_client.llen(keys.queue("mail")) == 2
    assert "cleared 2" in client.post("/queues/mail/clear", data={"confirm": "mail"}).text
    assert sync_client.llen(keys.queue("mail")) == 0
    assert client.post("/queues/nothing-known/pause").status_code == 400


def test_quiet_and_stop_signals(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    seed_odd(sync_client, keys)
    client.post("/busy/signal", data={"identity": "good", "signal": "quiet"})
    assert sync_client.lrange(keys.signals("good"), 0, -1) == [b"quiet"]
    client.post("/busy/signal", data={"all": "1", "signal": "stop"})
    assert sync_client.lrange(keys.signals("good"), 0, -1) == [b"quiet", b"stop"]
    assert sync_client.lrange(keys.signals("garbled"), 0, -1) == [b"stop"]
    assert not sync_client.exists(keys.signals("gone"))
    assert client.post("/busy/signal", data={"all": "1", "signal": "kill"}).status_code == 400


def test_periodic_run_now(client: TestClient, sync_client: sync_redis.Redis, keys: Keys) -> None:
    definition = {
        "name": "nightly",
        "job": "tests.nightly",
        "queue": "cron",
        "every": 60,
        "schedule": "every 60s",
    }
    sync_client.hset(keys.periodic("entries"), "nightly", orjson.dumps(definition))
    page = client.get("/periodic").text
    assert "nightly" in page
    # No live process reads "cron": said on the page, and a run is refused naming it.
    assert "no live process reads it" in page
    refused = client.post("/periodic/run", data={"name": "nightly"})
    assert "queue &#39;cron&#39;, which no live process reads" in refused.text
    assert sync_client.llen(keys.queue("cron")) == 0
    sync_client.zadd(keys.live_queues, {"cron": float(sync_client.time()[0])})
    assert "no live process reads it" not in client.get("/periodic").text
    answer = client.post("/periodic/run", data={"name": "nightly"})
    assert "enqueued nightly now" in answer.text
    (job,) = sync_client.lrange(keys.queue("cron"), 0, -1)
    assert orjson.loads(job)["class"] == "tests.nightly"
    assert "no periodic entry" in client.post("/periodic/run", data={"name": "x"}).text
    # The last result each run records, and an overlap=False entry's lock holder.
    result = {"jid": "j1", "slot": 60.0, "result": "failed, will retry", "error": "Boom", "at": 1.0}
    sync_client.hset(keys.periodic("results"), "nightly", orjson.dumps(result))
    locked = {**definition, "name": "sync", "overlap": False}
    sync_client.hset(keys.periodic("entries"), "sync", orjson.dumps(locked))
    sync_client.set(keys.periodic_running("sync"), "abc123")
    page = client.get("/periodic").text
    assert "failed, will retry" in page
    assert "(Boom)" in page
    assert "held by" in page
    assert "abc123" in page


ACTIONS: list[tuple[str, dict[str, str]]] = [
    ("/dead/action", {"action": "delete", "all": "1"}),
    ("/dead/action", {"action": "retry", "all": "1"}),
    ("/retries/action", {"action": "kill", "all": "1"}),
    ("/scheduled/action", {"action": "delete", "all": "1"}),
    ("/queues/mail/pause", {}),
    ("/queues/mail/clear", {"confirm": "mail"}),
    ("/busy/signal", {"all": "1", "signal": "stop"}),
    ("/periodic/run", {"name": "nightly"}),
]


@pytest.mark.parametrize(
    "headers",
    [
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
        {"origin": "https://evil.example"},
        {"origin": "null"},
    ],
)
def test_cross_site_posts_are_refused_and_change_nothing(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys, headers: dict[str, str]
) -> None:
    seed_odd(sync_client, keys)
    before = snapshot(sync_client, keys)
    for path, data in ACTIONS:
        answer = client.post(path, data=data, headers=headers)
        assert answer.status_code == 403, path
    assert changed(before, snapshot(sync_client, keys)) == set()
    same = client.post(
        "/queues/mail/pause",
        headers={"sec-fetch-site": "same-origin", "origin": "http://127.0.0.1:8000"},
    )
    assert same.status_code == 200


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"sec-fetch-site": "same-origin"}, True),
        ({"sec-fetch-site": "none"}, True),  # typed in the address bar, a bookmark
        ({"origin": "http://127.0.0.1:8000"}, True),
        # A TLS-terminating proxy: the browser's origin is https, the app sees http.
        ({"origin": "https://127.0.0.1:8000"}, True),
        ({"origin": "https://jobs.example", "x-forwarded-host": "jobs.example"}, True),
        ({"origin": "https://127.0.0.1.evil.example"}, False),
        # Sec-Fetch-Site, when sent, decides: the browser computed it.
        ({"sec-fetch-site": "cross-site", "origin": "http://127.0.0.1:8000"}, False),
        ({}, True),  # no browser: curl, a script
    ],
)
def test_which_requests_count_as_same_site(
    client: TestClient, headers: dict[str, str], allowed: bool
) -> None:
    answer = client.post("/queues/q1/pause", headers=headers)
    assert (answer.status_code != 403) is allowed, answer.text


def test_read_only_hides_and_refuses_every_action(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    seed_odd(sync_client, keys)
    before = snapshot(sync_client, keys)
    with TestClient(create_app(settings, read_only=True), base_url=LOOPBACK) as client:
        for path in PAGES:
            page = client.get(path)
            assert page.status_code == 200
            assert 'method="post"' not in page.text, path
        for path, data in ACTIONS:
            assert client.post(path, data=data).status_code == 403, path
    assert changed(before, snapshot(sync_client, keys)) == set()


def test_auth_hook_refuses_and_admits(settings: Settings) -> None:
    async def only_alice(request: Request) -> bool | Response:
        user = request.headers.get("x-user")
        if user is None:
            return PlainTextResponse("who?", status_code=401)
        return user == "alice"

    with TestClient(create_app(settings, auth=only_alice), base_url=LOOPBACK) as client:
        assert client.get("/").status_code == 401
        assert client.get("/", headers={"x-user": "bob"}).status_code == 403
        assert client.get("/static/style.css", headers={"x-user": "bob"}).status_code == 403
        assert client.post("/queues/mail/pause", headers={"x-user": "bob"}).status_code == 403
        assert client.get("/", headers={"x-user": "alice"}).status_code == 200


def test_basic_auth_reads_the_setting(settings: Settings) -> None:
    guarded = settings.model_copy(update={"web_auth": "admin:s3cret"})
    guarded = Settings(**{**settings.model_dump(), "web_auth": "admin:s3cret"})
    with TestClient(create_app(guarded, auth=basic_auth(guarded)), base_url=LOOPBACK) as client:
        refused = client.get("/")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Basic")
        assert client.get("/", auth=("admin", "wrong")).status_code == 401
        assert client.get("/", auth=("admin", "s3cret")).status_code == 200
    with TestClient(create_app(settings, auth=basic_auth(settings)), base_url=LOOPBACK) as client:
        assert client.get("/", auth=("admin", "")).status_code == 401  # no setting: nobody
    token = base64.b64encode(b"admin:s3cret").decode()
    assert token  # the header a browser sends: Basic <token>


@pytest.mark.anyio
async def test_retrying_one_dead_job_from_two_tabs_moves_it_once(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    raw = failed()
    sync_client.zadd(keys.dead, {raw: 1.0})
    app = create_app(settings)
    token = f"{1.0!r}~{jid_of(raw)}"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=LOOPBACK) as tab:
        answers = await asyncio.gather(
            *(tab.post("/dead/action", data={"action": "retry", "ref": token}) for _ in range(2))
        )
    notes = sorted(unquote_plus(a.headers["location"]) for a in answers)
    assert all(a.status_code == 303 for a in answers)
    assert sum("moved 1" in n for n in notes) == 1, notes
    assert sync_client.llen(keys.queue("mail")) == 1
    assert sync_client.zcard(keys.dead) == 0


def _first_token(client: TestClient, path: str, needle: str) -> str:
    return next(t for t in tokens(client, path) if needle in t)


@pytest.mark.parametrize(
    ("action", "touches"),
    [
        ("retry-dead", {"dead", "queue:mail", "wakeup:mail"}),
        ("delete-dead", {"dead"}),
        ("kill-retry", {"retry", "dead"}),
        ("retry-scheduled", {"schedule", "queue:mail", "wakeup:mail"}),
        ("pause", {"paused"}),
        ("clear", {"queue:mail"}),
        ("quiet", {"signals:good"}),
        ("delete-queued", {"queue:mail"}),
    ],
)
def test_each_action_touches_only_its_keys(
    client: TestClient,
    sync_client: sync_redis.Redis,
    keys: Keys,
    action: str,
    touches: set[str],
) -> None:
    jobs = seed_odd(sync_client, keys)
    plain = jid_of(jobs["plain"])
    before = snapshot(sync_client, keys)
    if action in ("retry-dead", "delete-dead"):
        verb = action.split("-", maxsplit=1)[0]
        ref = _first_token(client, "/dead", plain)
        answer = client.post("/dead/action", data={"action": verb, "ref": ref})
    elif action == "kill-retry":
        ref = _first_token(client, "/retries", plain)
        answer = client.post("/retries/action", data={"action": "kill", "ref": ref})
    elif action == "retry-scheduled":
        ref = _first_token(client, "/scheduled", plain)
        answer = client.post("/scheduled/action", data={"action": "retry", "ref": ref})
    elif action == "pause":
        answer = client.post("/queues/mail/pause")
    elif action == "clear":
        answer = client.post("/queues/mail/clear", data={"confirm": "mail"})
    elif action == "quiet":
        answer = client.post("/busy/signal", data={"identity": "good", "signal": "quiet"})
    else:
        page = client.get("/queues/mail").text
        index = re.findall(r'name="index" value="(\d+)"', page)[1]
        ref = unescape(re.findall(r'name="ref" value="([^"]+)"', page)[1])
        answer = client.post("/queues/mail/delete", data={"ref": ref, "index": index})
    assert answer.status_code == 200, answer.text
    expected = {f"{keys.ns}:{name}" for name in touches}
    assert changed(before, snapshot(sync_client, keys)) == expected
