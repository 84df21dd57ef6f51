"""The web UI over hostile data: huge names, wrong-typed keys, a Redis user without TIME,
and a "kill all" bigger than the dead set keeps."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from html import unescape

import orjson
import pytest
import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.web import create_app
from tests.web.conftest import LOOPBACK, failed

TWO_MB = 2_000_000


@pytest.fixture
def local(settings: Settings) -> TestClient:
    return TestClient(create_app(settings), base_url=LOOPBACK)


def test_huge_names_are_clipped_on_list_pages_and_whole_on_the_detail_page(
    local: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    name = "n" * TWO_MB
    error = "E" * TWO_MB
    identity = "i" * TWO_MB
    raw = failed(name, error_class=error, jid="j" * 24, queue="mail")
    sync_client.zadd(keys.dead, {raw: 1.0})
    sync_client.lpush(keys.queue("mail"), raw)
    sync_client.sadd(keys.queues, "mail", "q" * TWO_MB)
    sync_client.sadd(keys.processes, identity)
    sync_client.set(keys.process(identity), orjson.dumps({"hostname": "h" * TWO_MB, "pid": 1}))
    sync_client.hset(keys.last_beat, identity, "9999999999")
    slot = {"queue": "mail", "run_at": 1.0, "payload": raw.decode()}
    sync_client.hset(keys.workers(identity), "0", orjson.dumps(slot))
    for path in ("/", "/dead", "/dead?q=nnn", "/queues", "/queues/mail", "/busy"):
        page = local.get(path)
        assert page.status_code == 200, path
        assert len(page.text) < 200_000, (path, len(page.text))
    token = f"1.0~{'j' * 24}"
    detail = local.get("/dead/entry", params={"ref": token}).text
    assert name in detail
    assert error in detail


def test_kill_all_says_what_the_dead_set_dropped(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    small = settings.model_copy(update={"dead_max_jobs": 3})
    client = TestClient(create_app(small), base_url=LOOPBACK)
    sync_client.zadd(keys.retry, {failed(n=i): float(i) for i in range(10)})
    done = client.post("/retries/action", data={"action": "kill", "all": "1"})
    assert done.status_code == 200
    assert "moved 10 to dead" in done.text
    assert "dropped 7" in done.text
    assert sync_client.zcard(keys.dead) == 3


@pytest.mark.parametrize(
    ("post", "wrong"),
    [
        ("/retries/action", "retry"),
        ("/retries/action", "dead"),
        ("/dead/action", "dead"),
        ("/periodic/run", "entries"),
    ],
)
def test_wrong_typed_keys_in_actions_are_named(
    local: TestClient, sync_client: sync_redis.Redis, keys: Keys, post: str, wrong: str
) -> None:
    key = {"retry": keys.retry, "dead": keys.dead, "entries": keys.periodic("entries")}[wrong]
    if wrong == "dead":
        sync_client.zadd(keys.retry, {failed(): 1.0})
    sync_client.set(key, "a string where another type belongs")
    kills = [{"action": "kill", "all": "1"}, {"action": "kill", "all": "1", "q": "emails"}]
    forms = {
        ("/retries/action", "retry"): [
            *kills,
            {"action": "retry", "all": "1"},
            {"action": "retry", "all": "1", "q": "emails"},
            {"action": "delete", "all": "1", "q": "emails"},
        ],
        ("/retries/action", "dead"): kills,
        ("/dead/action", "dead"): [
            {"action": "retry", "all": "1"},
            {"action": "retry", "all": "1", "q": "emails"},
            {"action": "delete", "all": "1", "q": "emails"},
        ],
        ("/periodic/run", "entries"): [{"name": "nightly"}],
    }[(post, wrong)]
    for data in forms:
        answer = local.post(post, data=data)
        assert answer.status_code in (200, 409), (data, answer.text[:500])
        assert key in answer.text, (data, answer.text[:2000])
    assert sync_client.get(key) == b"a string where another type belongs"


@pytest.fixture
def no_time_user(sync_client: sync_redis.Redis, settings: Settings) -> Iterator[Settings]:
    user = f"notime{uuid.uuid4().hex[:6]}"
    sync_client.acl_setuser(
        user, enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-time"]
    )
    url = settings.redis_url.replace("redis://", f"redis://{user}:pw@", 1)
    try:
        yield settings.model_copy(update={"redis_url": url})
    finally:
        sync_client.acl_deluser(user)


def test_a_user_without_time_gets_a_line_naming_the_permission(
    no_time_user: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    entry = {
        "name": "nightly",
        "job": "reports.nightly",
        "queue": "default",
        "every": 60,
        "schedule": "every 60s",
    }
    sync_client.hset(keys.periodic("entries"), "nightly", orjson.dumps(entry))
    client = TestClient(create_app(no_time_user), base_url=LOOPBACK)
    for answer in (client.get("/periodic"), client.post("/periodic/run", data={"name": "nightly"})):
        assert answer.status_code in (200, 403), answer.text[:500]
        assert "'time' command" in unescape(answer.text), answer.text[:2000]
        assert "NOPERM" in answer.text


def test_wrong_typed_queue_or_signals_key_is_named_not_a_500(
    local: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.set(keys.queue("mail"), "a string where a list belongs")
    answer = local.post("/queues/mail/delete", data={"ref": "x", "index": "0"})
    assert answer.status_code == 409
    assert keys.queue("mail") in answer.text
    sync_client.sadd(keys.processes, "good")
    sync_client.set(keys.process("good"), orjson.dumps({"pid": 1}))
    sync_client.hset(keys.last_beat, "good", "9999999999")
    sync_client.set(keys.signals("good"), "a string where a list belongs")
    for data in ({"identity": "good", "signal": "quiet"}, {"all": "1", "signal": "stop"}):
        answer = local.post("/busy/signal", data=data)
        assert answer.status_code == 409, answer.text[:500]
        assert keys.signals("good") in answer.text
    assert sync_client.get(keys.signals("good")) == b"a string where a list belongs"
