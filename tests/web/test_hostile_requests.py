"""The web UI behind a hostile network: rebinding hosts, odd parameters, forged notes, odd names.

Each test is a request a hostile page or a careless link can make; the UI must
refuse it with a clear 4xx line (security headers on every answer) and never
act on another thing than the one the operator meant.
"""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import urljoin

import pytest
import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.web import create_app
from tests.web.conftest import LOOPBACK, PAGES, failed

REBIND = {
    "host": "rebind.evil.example",
    "origin": "http://rebind.evil.example",
    "sec-fetch-site": "same-origin",
}


@pytest.fixture
def local(settings: Settings) -> TestClient:
    """The default app, asked as a browser on this machine asks it."""
    return TestClient(create_app(settings), base_url=LOOPBACK)


def test_a_rebinding_host_is_refused_by_default(
    local: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.sadd(keys.queues, "mail")
    refused = local.post("/queues/mail/pause", headers=REBIND)
    assert refused.status_code == 400
    assert "rebind.evil.example" in refused.text
    assert refused.headers["x-frame-options"] == "DENY"
    assert not sync_client.sismember(keys.paused, "mail")
    assert local.get("/queues", headers=REBIND).status_code == 400
    # The bound names stay allowed, with or without a port, IPv6 included.
    for host in ("127.0.0.1:8000", "localhost", "LOCALHOST:80", "[::1]:8000"):
        assert local.get("/queues", headers={"host": host}).status_code == 200, host


def test_allowed_hosts_are_configurable(settings: Settings) -> None:
    app = create_app(settings, allowed_hosts=["jobs.example.com", "*.internal.example"])
    with TestClient(app, base_url="http://jobs.example.com") as named:
        assert named.get("/queues").status_code == 200
        assert named.get("/queues", headers={"host": "a.internal.example"}).status_code == 200
        assert named.get("/queues", headers={"host": "127.0.0.1"}).status_code == 400
        assert named.get("/queues", headers={"host": "internal.example.evil"}).status_code == 400
    with TestClient(create_app(settings, allowed_hosts=["*"]), base_url="http://any.where") as c:
        assert c.get("/queues").status_code == 200


def test_pages_with_data_are_not_cached_and_errors_carry_the_headers(
    settings: Settings,
) -> None:
    app = create_app(settings)

    async def boom(request: object) -> None:
        raise RuntimeError("a bug")

    app.add_route("/boom", boom)
    client = TestClient(app, base_url=LOOPBACK, raise_server_exceptions=False)
    for path in PAGES:
        answer = client.get(path)
        assert answer.headers.get("cache-control") == "private, no-store", path
    broken = client.get("/boom")
    assert broken.status_code == 500
    assert broken.headers.get("content-security-policy", "").startswith("default-src 'none'")
    assert broken.headers.get("x-frame-options") == "DENY"
    assert broken.headers.get("cache-control") == "private, no-store"
    assert "a bug" not in broken.text  # the traceback stays in the log


@pytest.mark.parametrize(
    ("path", "names"),
    [
        ("/dead/entry?ref=nan~x", "ref"),
        ("/dead/entry?ref=inf~x", "ref"),
        ("/dead?q=x&cursor=1e23", "cursor"),
        ("/dead?q=x&cursor=100000000000000000000000", "cursor"),
        ("/dead?q=x&cursor=-1", "cursor"),
        ("/dead?page=1e21", "page"),
        ("/dead?page=1000000000000000000000", "page"),
        ("/queues/mail?page=1000000000000000000000", "page"),
        ("/retries?page=x", "page"),
    ],
)
def test_bad_parameters_are_a_400_naming_them(local: TestClient, path: str, names: str) -> None:
    answer = local.get(path)
    assert answer.status_code == 400, (path, answer.text[:500])
    assert names in answer.text
    assert answer.headers.get("x-frame-options") == "DENY"


def test_a_huge_queue_index_or_a_bad_ref_in_a_form_is_a_400(
    local: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.lpush(keys.queue("mail"), failed())
    sync_client.zadd(keys.dead, {failed(): 5.0})
    for index in ("9" * 30, "-" + "9" * 30):
        answer = local.post("/queues/mail/delete", data={"ref": "x", "index": index})
        assert answer.status_code == 400, answer.text[:500]
        assert "index" in answer.text
    for action in ("retry", "delete"):
        answer = local.post("/dead/action", data={"action": action, "ref": "nan~x"})
        assert answer.status_code == 400, answer.text[:500]
        assert "ref" in answer.text
    assert sync_client.llen(keys.queue("mail")) == 1
    assert sync_client.zcard(keys.dead) == 1


def test_a_note_in_the_url_is_not_shown(local: TestClient) -> None:
    spoof = "Your session expired: call +1 555 0100"
    page = local.get("/queues", params={"note": spoof})
    assert page.status_code == 200
    assert spoof not in page.text


def test_the_note_an_action_writes_is_shown(
    local: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.sadd(keys.queues, "mail")
    done = local.post("/queues/mail/pause")
    assert done.status_code == 200  # followed the 303
    assert "paused mail" in done.text
    assert sync_client.sismember(keys.paused, "mail")


def _actions(html: str) -> list[str]:
    return [unescape(a) for a in re.findall(r'(?:action|href)="([^"]+)"', html)]


def test_every_name_in_a_url_is_encoded(
    local: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    """A queue named ``../queues/victim``: no link or button of it reaches ``victim``."""
    sync_client.sadd(keys.queues, "../queues/victim")
    sync_client.lpush(keys.queue("victim"), failed())
    for path in ("/", "/queues"):
        page = local.get(path).text
        assert "../queues/victim" in page  # shown, as a name
        for link in _actions(page):
            # A browser resolves dot segments: resolved, the link must not name victim.
            resolved = urljoin(f"{LOOPBACK}{path}", link)
            assert not resolved.startswith(f"{LOOPBACK}/queues/victim"), (path, link)
            if "/queues/" in link and link.endswith(("/pause", "/clear")):
                local.post(resolved, data={"confirm": "../queues/victim"})
    assert not sync_client.sismember(keys.paused, "victim")
    assert sync_client.llen(keys.queue("victim")) == 1
    from cogworker_async.web.app import segment

    assert segment("../queues/victim") == "..%2Fqueues%2Fvictim"
    assert segment("a b?c#d%e") == "a%20b%3Fc%23d%25e"
