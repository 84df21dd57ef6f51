"""The Batches page: the newest batches with their progress, and one batch in full."""

from __future__ import annotations

import time

import anyio
import orjson
import redis as sync_redis
from redis.asyncio import Redis
from starlette.testclient import TestClient

from cogworker_async.keys import Keys
from cogworker_async.payload import new_jid
from cogworker_async.settings import Settings
from cogworker_async.store import batches
from cogworker_async.store.batches import Callback


async def _seed(settings: Settings, keys: Keys, description: str) -> tuple[str, str, str]:
    redis = Redis.from_url(settings.redis_url)
    try:
        bid = new_jid()
        done = Callback("default", orjson.dumps({"callback": "complete"}))
        await batches.open_batch(
            redis,
            keys,
            bid=bid,
            created_at=time.time(),
            description=description,
            callbacks={"complete": done},
        )
        child = new_jid()
        await batches.open_batch(redis, keys, bid=child, created_at=time.time(), parent=bid)
        jid = new_jid()
        job = orjson.dumps({"jid": jid, "class": "x", "args": [], "queue": "default", "batch": bid})
        await batches.add_members(redis, keys, bid=bid, queue="default", members=[(jid, job)])
        await batches.close_batch(redis, keys, bid)
        return bid, child, jid
    finally:
        await redis.aclose()


def test_the_batches_page_shows_progress_and_one_batch_in_full(
    client: TestClient, settings: Settings, keys: Keys
) -> None:
    bid, child, jid = anyio.run(_seed, settings, keys, "import <b>42</b>")
    listed = client.get("/batches").text
    assert bid in listed
    assert "import &lt;b&gt;42&lt;/b&gt;" in listed  # escaped
    assert "0 of 2" in listed  # the member and the child batch, none ended
    assert "on_complete: waiting" in listed
    shown = client.get(f"/batches/{bid}")
    assert shown.status_code == 200
    assert jid in shown.text
    assert f"/batches/{child}" in shown.text  # the child, pending, linked
    assert client.get(f"/batches/{'0' * 24}").status_code == 404


def test_a_batch_with_counts_written_by_hand_still_renders(
    client: TestClient, settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    bid, _, _ = anyio.run(_seed, settings, keys, "odd")
    sync_client.hset(keys.batch(bid), mapping={"total": "lots", "created_at": "yesterday"})
    assert client.get("/batches").status_code == 200
    assert client.get(f"/batches/{bid}").status_code == 200
    sync_client.set(keys.batches, "not a sorted set")
    page = client.get("/batches")
    assert page.status_code == 200
    assert "no batches" in page.text
