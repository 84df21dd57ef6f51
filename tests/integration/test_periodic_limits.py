"""A periodic run of a job with limits is held like any enqueued job (issue 23): the
entry carries the limits in each run's payload (the job's own, an ``.options(...)``
one, ``@periodic(limits=...)``'s), keys resolved on the entry's arguments, and the
ticker says limits are in use before it pushes one, so the fetch checks it.

Runs are pushed by the ticker's own claim step (``Claimer``) and taken by the real
fetch, against a real Redis."""

from __future__ import annotations

import logging
import time

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import job, limits, periodic
from cogworker_async.api.periodic_reads import run_now
from cogworker_async.keys import Keys
from cogworker_async.periodic.claims import Claimer
from cogworker_async.periodic.ticker import publish
from cogworker_async.periodic_entry import Entry
from cogworker_async.store import commands

pytestmark = pytest.mark.anyio

ME = "host:1:periodic-limits"


@job(name="tests.periodic_limited", limits=[limits.concurrency("nightly", 1)])
async def limited_job(account: int) -> None: ...


@periodic(60, name="decorated-limited", limits=[limits.window("reports", 5, 60)])
async def decorated_limited() -> None: ...


async def push(redis: Redis, keys: Keys, entry: Entry) -> bytes:
    """One slot of ``entry`` claimed and pushed as the ticker does; its payload."""
    slot = float(int(time.time()) // 60 * 60)
    pushed = await Claimer(redis, keys, logging.getLogger("test")).claim(
        [(entry, slot, False, 60.0)], time.time()
    )
    assert pushed == 1
    raw = await redis.lindex(keys.queue(entry.queue), 0)
    assert isinstance(raw, bytes)
    return raw


async def take(redis: Redis, keys: Keys, queue: str = "default") -> list[bytes]:
    got = await commands.fetch(
        redis, keys, identity=ME, queues=[queue], want=5, acks=[], reliable=True
    )
    return got.jobs


async def test_a_run_of_a_job_with_a_concurrency_limit_is_held_while_its_key_is_full(
    redis: Redis, keys: Keys
) -> None:
    entry = periodic.every(60, limited_job, args=(7,), name="nightly-7")
    raw = await push(redis, keys, entry)
    fields = orjson.loads(raw)
    assert fields["limits"] == [["concurrency", "nightly", 1]]
    assert fields["limit_slots"] == ["nightly"]
    assert await redis.exists(keys.limits_used)  # said before the push: the fetch checks
    await redis.sadd(keys.limit_slots("nightly"), "running-one")
    assert await take(redis, keys) == []
    assert await redis.lrange(keys.limit_parked("nightly"), 0, -1) == [raw]
    # Its key frees: the next fetch runs it, with the slot.
    await redis.srem(keys.limit_slots("nightly"), "running-one")
    await redis.rpush(keys.queue("default"), await redis.rpop(keys.limit_parked("nightly")))
    assert await take(redis, keys) == [raw]
    assert await redis.smembers(keys.limit_slots("nightly")) == {fields["jid"].encode()}


async def test_an_options_limit_keyed_on_the_arguments_is_resolved_once_per_entry(
    redis: Redis, keys: Keys
) -> None:
    per_account = limited_job.options(
        limits=[limits.concurrency(lambda account: f"acct:{account}", 1)]
    )
    entry = periodic.every(60, per_account, args=(42,), name="acct-42")
    assert entry.options["limits"] == [["concurrency", "acct:42", 1]]
    entry.digest  # noqa: B018 -- the definition stays JSON (periodic list shows its hash)
    await redis.sadd(keys.limit_slots("acct:42"), "running-one")
    raw = await push(redis, keys, entry)
    assert await take(redis, keys) == []
    assert await redis.lrange(keys.limit_parked("acct:42"), 0, -1) == [raw]


async def test_a_periodic_declared_with_limits_carries_them(redis: Redis, keys: Keys) -> None:
    [entry] = decorated_limited.schedules
    assert entry.options["limits"] == [["window", "reports", 5, 60.0]]
    raw = await push(redis, keys, entry)
    assert await take(redis, keys) == [raw]  # a window with room: admitted, counted
    assert await redis.zcard(keys.limit_window("reports")) == 1


def test_a_key_function_that_fails_on_the_entry_arguments_is_refused_at_declaration() -> None:
    bad = limited_job.options(limits=[limits.concurrency(lambda account: 1 / 0, 1)])
    with pytest.raises(ValueError):
        periodic.every(60, bad, args=(1,), name="bad")


async def test_run_now_of_a_limited_entry_says_limits_are_in_use(redis: Redis, keys: Keys) -> None:
    entry = periodic.every(60, limited_job, args=(3,), name="nightly-3")
    await publish(redis, keys, [entry], time.time())
    jid = await run_now(redis, keys, "nightly-3", force=True)
    raw = await redis.lindex(keys.queue("default"), 0)
    assert isinstance(raw, bytes)
    assert orjson.loads(raw)["jid"] == jid
    assert orjson.loads(raw)["limits"] == [["concurrency", "nightly", 1]]
    assert await redis.exists(keys.limits_used)
