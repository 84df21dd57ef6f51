"""An operator's removal of held jobs (issue 23): ``abort JID`` finds a job held by a
limit, ``limits clear-held KEY`` deletes every job held on a key, ``queues clear Q``
deletes Q's held jobs too; each removed job's holds are settled as an operator's
delete or an abort says (a batch counts it ended, failed; its unique lock goes).

The jobs are held by the real fetch (a slot taken, the rest parked), then
removed through the api and the CLI a user runs."""

from __future__ import annotations

import time

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import api
from cogworker_async.api.limits import clear_held_of_queue
from cogworker_async.client.aborting import AbortOutcome, abort_job
from cogworker_async.keys import Keys
from cogworker_async.payload import new_jid
from cogworker_async.settings import Settings
from cogworker_async.store import batches, commands
from cogworker_async.store import limits as limits_store
from tests.integration.test_admin_cli import _ok
from tests.integration.test_cli import cli
from tests.lua.support import enqueue, make_job

pytestmark = pytest.mark.anyio

ME = "host:1:ops"


def held_job(jid: str, key: str, *, queue: str = "default", **extra: object) -> bytes:
    return make_job(
        queue=queue, jid=jid, limits=[["concurrency", key, 1]], limit_slots=[key], **extra
    )


async def hold(redis: Redis, keys: Keys, queue: str, *jobs: bytes) -> None:
    """Enqueue ``jobs`` on ``queue`` and let the fetch take them: with each key's one
    slot held by a stranger, every one of them is parked on its key."""
    await limits_store.mark_limits_used(redis, keys)
    for job in jobs:
        for key in orjson.loads(job)["limit_slots"]:
            await redis.sadd(keys.limit_slots(key), "stranger")
    await enqueue(redis, keys, queue, *jobs)
    got = await commands.fetch(
        redis, keys, identity=ME, queues=[queue], want=len(jobs), acks=[], reliable=True
    )
    assert got.jobs == []
    assert await redis.llen(keys.queue(queue)) == 0


async def batch_of(redis: Redis, keys: Keys, jids: list[str], key: str) -> str:
    """A closed batch whose members are ``jids``, each held on limit ``key``."""
    bid = new_jid()
    await batches.open_batch(redis, keys, bid=bid, created_at=time.time(), callbacks={})
    members = [(jid, held_job(jid, key, batch=bid)) for jid in jids]
    # Added onto a queue nobody reads, then moved to the real one by hold().
    await batches.add_members(redis, keys, bid=bid, queue="staging", members=members)
    await redis.delete(keys.queue("staging"))
    await batches.close_batch(redis, keys, bid)
    return bid


async def counts(redis: Redis, keys: Keys, bid: str) -> tuple[str, int, int, int]:
    fields = await batches.read_batch(redis, keys, bid)
    assert fields is not None
    pending = len(await batches.pending_members(redis, keys, bid))
    return fields["state"], int(fields.get("failed", 0)), int(fields.get("succeeded", 0)), pending


async def test_abort_removes_a_held_job_and_its_batch_counts_it_failed(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    first, second = new_jid(), new_jid()
    bid = await batch_of(redis, keys, [first, second], "acct:1")
    await hold(
        redis,
        keys,
        "default",
        held_job(first, "acct:1", batch=bid),
        held_job(second, "acct:1", batch=bid),
    )
    assert await redis.llen(keys.limit_parked("acct:1")) == 2

    assert await abort_job(redis, keys, settings, first) is AbortOutcome.REMOVED
    held = await redis.lrange(keys.limit_parked("acct:1"), 0, -1)
    assert [orjson.loads(raw)["jid"] for raw in held] == [second]
    assert await counts(redis, keys, bid) == ("running", 1, 0, 1)
    assert await redis.smembers(keys.limit_slots("acct:1")) == {b"stranger"}  # not its slot
    assert await abort_job(redis, keys, settings, second) is AbortOutcome.REMOVED
    assert await counts(redis, keys, bid) == ("done", 2, 0, 0)  # its last member: over


async def test_clear_held_deletes_every_held_job_of_a_key_and_releases_their_locks(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    jids = [new_jid() for _ in range(3)]
    bid = await batch_of(redis, keys, jids[:2], "acct:2")
    lock = keys.unique("u1")
    await redis.set(lock, jids[2])
    jobs = [
        held_job(jids[0], "acct:2", batch=bid),
        held_job(jids[1], "acct:2", batch=bid),
        held_job(jids[2], "acct:2", unique={"key": lock, "for": 60}),
    ]
    other = held_job(new_jid(), "acct:3")
    await hold(redis, keys, "default", *jobs, other)

    text = _ok(cli(settings, "limits", "clear-held", "acct:2", "--yes"))
    assert "deleted 3 held job(s) of acct:2" in text
    assert not await redis.exists(keys.limit_parked("acct:2"))
    assert await redis.lrange(keys.limit_parked("acct:3"), 0, -1) == [other]  # another key's
    assert await counts(redis, keys, bid) == ("done", 2, 0, 0)
    assert not await redis.exists(lock)  # the unique lock of a job that never runs: gone
    # Not asked (no terminal, no --yes): refused, nothing deleted.
    refused = cli(settings, "limits", "clear-held", "acct:3")
    assert refused.returncode == 2
    assert await redis.llen(keys.limit_parked("acct:3")) == 1


async def test_queues_clear_deletes_that_queues_held_jobs_only(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    mine = [held_job(new_jid(), "shared", queue="mail") for _ in range(3)]
    theirs = [held_job(new_jid(), "shared", queue="sms") for _ in range(2)]
    await hold(redis, keys, "mail", mine[0], mine[1])
    await hold(redis, keys, "sms", theirs[0])
    await hold(redis, keys, "mail", mine[2])
    await hold(redis, keys, "sms", theirs[1])
    await hold(redis, keys, "mail", held_job(new_jid(), "k2", queue="mail"))
    await redis.lpush(keys.queue("mail"), make_job(queue="mail"))  # one waiting on the queue

    assert await api.clear_queue(redis, keys, "mail") == 5
    assert await redis.llen(keys.queue("mail")) == 0
    assert not await redis.exists(keys.limit_parked("k2"))
    # The other queue's held jobs keep their places, in order.
    assert await redis.lrange(keys.limit_parked("shared"), 0, -1) == [theirs[1], theirs[0]]


async def test_a_queues_held_jobs_are_found_window_by_window(redis: Redis, keys: Keys) -> None:
    jobs = [held_job(new_jid(), "w", queue=("a" if i % 3 else "b")) for i in range(10)]
    await hold(redis, keys, "a", *[j for j in jobs if b'"queue":"a"' in j])
    await hold(redis, keys, "b", *[j for j in jobs if b'"queue":"b"' in j])
    assert await clear_held_of_queue(redis, keys, "a", window=2) == 6
    left = await redis.lrange(keys.limit_parked("w"), 0, -1)
    assert [orjson.loads(raw)["queue"] for raw in left] == ["b"] * 4
