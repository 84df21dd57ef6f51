"""A batch's results list (batch_add.lua) and its reader (batch_results.lua), against
real Redis: listed in the order added, once under a once-token, only for members
that keep a result, kept as long as the batch once it is done; read a chunk a
call with None for a result that is not there; and a chord's reference resolved
into exactly ``count`` results.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from redis.asyncio import Redis

from cogworker_async.context import reset_worker_services, set_worker_services
from cogworker_async.holds import Event
from cogworker_async.keys import Keys
from cogworker_async.payload import new_jid
from cogworker_async.store import batches
from cogworker_async.store.batch_results import read_results
from cogworker_async.store.results import encode_failure, encode_success
from cogworker_async.workflows.results import RESULTS_OF, with_results
from tests.lua.support import make_job
from tests.lua.test_batches import open_batch, settle

pytestmark = pytest.mark.anyio


async def add(
    redis: Redis, keys: Keys, bid: str, n: int, *, keep: bool = True, once: str = ""
) -> list[str]:
    jids = [new_jid() for _ in range(n)]
    members = [(jid, make_job(jid=jid, batch=bid)) for jid in jids]
    await batches.add_members(
        redis, keys, bid=bid, queue="default", members=members, once=once, keep_results=keep
    )
    return jids


async def keep(redis: Redis, keys: Keys, jid: str, envelope: bytes) -> None:
    await redis.rpush(keys.result(jid), envelope)


async def read_all(redis: Redis, keys: Keys, bid: str, chunk: int) -> list[tuple[str, Any]]:
    return [pair async for pairs in read_results(redis, keys, bid, chunk=chunk) for pair in pairs]


async def test_members_are_listed_in_order_once_and_only_when_they_keep_a_result(
    redis: Redis, keys: Keys
) -> None:
    bid = await open_batch(redis, keys)
    first = await add(redis, keys, bid, 3)
    await add(redis, keys, bid, 2, keep=False)  # keep no result: not listed
    second = await add(redis, keys, bid, 2, once="chunk:0")
    again = await add(redis, keys, bid, 2, once="chunk:0")  # a second start: nothing
    listed = [jid.decode() for jid in await redis.lrange(keys.batch_results(bid), 0, -1)]
    assert listed == first + second
    assert not set(again) & set(listed)


async def test_a_flow_stage_lists_only_its_own_tokened_adds(redis: Redis, keys: Keys) -> None:
    """A member a running step adds to its stage (no once-token) while the stage is
    still being added is not listed: the list stays the group, in order."""
    bid = new_jid()
    opened = await batches.open_batch(
        redis, keys, bid=bid, created_at=time.time(), results_by_token=True
    )
    assert opened is batches.Opened.OPENED
    first = await add(redis, keys, bid, 2, once="chunk:0")
    await add(redis, keys, bid, 1)  # from a running step: pending, not listed
    second = await add(redis, keys, bid, 2, once="chunk:1")
    listed = [jid.decode() for jid in await redis.lrange(keys.batch_results(bid), 0, -1)]
    assert listed == first + second
    assert await redis.scard(keys.batch_pending(bid)) == 5


async def test_chunks_read_every_result_in_order_with_none_where_there_is_none(
    redis: Redis, keys: Keys
) -> None:
    bid = await open_batch(redis, keys)
    jids = await add(redis, keys, bid, 10)
    for i, jid in enumerate(jids):
        if i == 3:
            await keep(redis, keys, jid, encode_failure("RuntimeError", "broke"))
        elif i == 5:
            await redis.set(keys.result(jid), "a string, not a list")  # a wrong type
        elif i != 7:  # 7: kept none, or it expired
            await keep(redis, keys, jid, encode_success({"i": i}))
    expected = [(jid, None if i in (3, 5, 7) else {"i": i}) for i, jid in enumerate(jids)]
    for chunk in (1, 3, 5, 10, 1_000):  # boundaries inside, at and past the end
        assert await read_all(redis, keys, bid, chunk) == expected
    assert await read_all(redis, keys, new_jid(), 4) == []  # no such batch
    with pytest.raises(ValueError, match="chunk"):
        await read_all(redis, keys, bid, 0)


async def test_the_list_is_kept_as_long_as_the_batch_once_it_is_done(
    redis: Redis, keys: Keys
) -> None:
    bid = new_jid()
    await batches.open_batch(redis, keys, bid=bid, created_at=time.time(), keep=120)
    [jid] = await add(redis, keys, bid, 1)
    assert await redis.ttl(keys.batch_results(bid)) == -1  # running: kept
    await batches.close_batch(redis, keys, bid)
    await settle(redis, keys, bid, jid, Event.ACK)
    assert 0 < await redis.ttl(keys.batch_results(bid)) <= 120
    assert 0 < await redis.ttl(keys.batch(bid)) <= 120


async def test_a_reference_resolves_to_exactly_count_results(redis: Redis, keys: Keys) -> None:
    bid = await open_batch(redis, keys)
    jids = await add(redis, keys, bid, 4)
    for i, jid in enumerate(jids):
        await keep(redis, keys, jid, encode_success(i * 10))
    lent = set_worker_services((redis, keys))
    try:
        job = {RESULTS_OF: {"bid": bid, "count": 4}}
        assert await with_results(job, ["x"]) == [[0, 10, 20, 30], "x"]
        # The list expired (or is shorter): None for each result not there.
        job = {RESULTS_OF: {"bid": new_jid(), "count": 3}}
        assert await with_results(job, []) == [[None, None, None]]
        job = {RESULTS_OF: {"bid": bid, "count": 2}}  # never more than count
        assert await with_results(job, []) == [[0, 10]]
        for bad in (
            "a bid",
            {"bid": bid},
            {"bid": "", "count": 1},
            {"bid": bid, "count": -1},
            {"bid": bid, "count": True},
            {"bid": 7, "count": 1},
        ):
            with pytest.raises(ValueError, match="results_of"):
                await with_results({RESULTS_OF: bad}, [])
    finally:
        reset_worker_services(lent)
