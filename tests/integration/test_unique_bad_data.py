"""Bad data under the lock prefix: a wrong-typed lock key is moved to quarantine
(by the enqueue that meets it, or by ``locks delete``), never a raw WRONGTYPE
for every enqueue; a lock value that is not UTF-8 is listed, output as JSON,
deleted when orphaned, and shown by the web page, never a crash."""

from __future__ import annotations

import json
import logging
import re

import pytest
import redis as sync_redis
from redis.asyncio import Redis
from starlette.testclient import TestClient

from cogworker_async import Client, Settings, api, job
from cogworker_async.keys import Keys
from cogworker_async.unique import lock_key
from cogworker_async.unique.lock import digest
from cogworker_async.web import create_app
from tests.integration.test_cli import cli
from tests.web.conftest import LOOPBACK

pytestmark = pytest.mark.anyio

NOT_UTF8 = b"\xff\xfe-not-utf8"


@job(name="bd.send", unique="until_executed", unique_for=60)
async def send(to: str) -> None: ...


def key_of(keys: Keys, *args: object) -> str:
    return lock_key(keys, "bd.send", digest("bd.send", args, {}, "default"))


async def test_enqueue_moves_a_wrong_typed_lock_to_quarantine(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    one, many = key_of(keys, "a"), key_of(keys, "b")
    await redis.hset(one, "left", "here")
    await redis.rpush(many, "x")
    await redis.hset(keys.quarantine(many), "earlier", "quarantine")  # kept too
    with caplog.at_level(logging.ERROR):
        async with Client(settings) as client:
            first = await client.enqueue(send, "a")
            result = await client.enqueue_many(send, [("b",), ("c",)])
    assert first is not None
    assert not first.duplicate
    assert await redis.get(one) == first.jid.encode()
    assert 0 < await redis.pttl(one) <= 60_000
    assert await redis.hgetall(keys.quarantine(one)) == {b"left": b"here"}
    assert await redis.ttl(keys.quarantine(one)) > 0
    assert len(result) == 2
    assert not result.skipped
    assert await redis.get(many) == result[0].encode()
    moved = f"{keys.quarantine(many)}:{result[0]}"
    assert await redis.lrange(moved, 0, -1) == [b"x"]
    assert await redis.hgetall(keys.quarantine(many)) == {b"earlier": b"quarantine"}
    assert await redis.llen(keys.queue("default")) == 3
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(one in m and keys.quarantine(one) in m for m in errors), errors
    assert any(many in m and moved in m for m in errors), errors


def test_locks_delete_moves_a_wrong_typed_key_to_quarantine(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    odd = keys.unique("jobs.odd:abc")
    sync_client.hset(odd, "a", "b")
    listed = cli(settings, "locks", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    assert f"{odd} is not a string, so not a lock" in listed.stderr
    done = cli(settings, "locks", "delete", odd)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"moved {odd} (a hash, not a lock) to {keys.quarantine(odd)}"
    assert not sync_client.exists(odd)
    assert sync_client.hgetall(keys.quarantine(odd)) == {b"a": b"b"}
    assert sync_client.ttl(keys.quarantine(odd)) > 0


def test_a_lock_value_that_is_not_utf8(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    odd = keys.unique("jobs.odd:abc")
    sync_client.set(odd, NOT_UTF8, ex=600)
    listed = cli(settings, "locks", "list")
    assert listed.returncode == 0, listed.stderr
    assert odd in listed.stdout
    as_json = cli(settings, "locks", "list", "--json")
    assert as_json.returncode == 0, as_json.stderr
    [lock] = json.loads(as_json.stdout)
    assert lock["key"] == odd
    assert lock["holder"] == NOT_UTF8.decode("utf-8", "replace")
    with TestClient(create_app(settings), base_url=LOOPBACK) as web:
        # A page scans a bounded part of the keyspace (api.PAGE_SCANS steps): on the
        # test session's shared server, full of other tests' keys, the lock may
        # come on a later page. Followed through the pages' own "next" links.
        path, shown = "/locks", False
        for _ in range(1000):
            page = web.get(path)
            assert page.status_code == 200
            if odd in page.text:
                shown = True
                break
            more = re.search(r'href="(/locks\?cursor=\d+)"', page.text)
            if more is None:
                break
            path = more.group(1)
        assert shown, "the lock is on no page of /locks"
    orphaned = cli(settings, "locks", "delete-orphaned", "--yes")
    assert orphaned.returncode == 0, orphaned.stderr
    assert "1 orphaned lock deleted" in orphaned.stdout
    assert not sync_client.exists(odd)


async def test_api_delete_orphaned_keeps_a_not_utf8_holder_that_is_queued(
    redis: Redis, keys: Keys
) -> None:
    held = keys.unique("jobs.odd:abc")
    await redis.set(held, NOT_UTF8)
    await redis.sadd(keys.queues, "default")
    await redis.lpush(keys.queue("default"), b'{"jid":"' + NOT_UTF8 + b'"}')
    assert await api.delete_orphaned(redis, keys) == []
    assert await redis.get(held) == NOT_UTF8
