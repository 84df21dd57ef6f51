"""A page size to choose on the set and queue pages (``?size=``): 25, 50, 100 or 200."""

from __future__ import annotations

import re

import redis as sync_redis
from starlette.testclient import TestClient

from cogworker_async.keys import Keys
from tests.lua.support import make_job


def _rows(page: str) -> int:
    return len(re.findall(r'<input type="checkbox" name="ref"', page))


def test_the_dead_set_pages_by_the_size_chosen(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.zadd(keys.dead, {make_job(jid=f"j{i:03d}"): 1_700_000_000 + i for i in range(130)})
    assert _rows(client.get("/dead").text) == 50
    page = client.get("/dead", params={"size": "100"}).text
    assert _rows(page) == 100
    assert "page 1 of 2" in page
    assert 'href="/dead?page=2&amp;size=100"' in page  # the size kept while paging
    assert "<strong>100</strong>" in page
    assert _rows(client.get("/dead", params={"size": "25", "page": "6"}).text) == 5


def test_a_queue_pages_by_the_size_chosen(
    client: TestClient, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.sadd(keys.queues, "mail")
    sync_client.lpush(keys.queue("mail"), *[make_job(jid=f"q{i:03d}") for i in range(60)])
    page = client.get("/queues/mail", params={"size": "25"}).text
    assert len(re.findall(r'name="index"', page)) == 25
    assert 'href="/queues/mail?order=newest&amp;page=2&amp;size=25"' in page


def test_a_size_not_offered_is_a_clear_400(client: TestClient) -> None:
    answer = client.get("/dead", params={"size": "7"})
    assert answer.status_code == 400
    assert "bad size 7: expected one of 25, 50, 100, 200" in answer.text
