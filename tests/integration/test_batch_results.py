"""A batch's results, stored once and read lazily, end to end with a worker.

A chord's callback gets its group's results in order, while its payload
carries only a reference (``results_of``) however large the group; a plain
batch's results come back in member order from ``client.batch_results``; a
batch's callback reads its own batch's results with ``batch_results()``; a
second run of a callback reads the same; a failed member (or one whose result
is gone) gives None in its place, as the copied list did.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from cogworker_async import (
    Client,
    JobFunction,
    Settings,
    Worker,
    batch_results,
    chord,
    current_job,
    group,
    job,
    step,
)
from cogworker_async.keys import Keys
from cogworker_async.payload import new_jid
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

# What each callback run saw: (its stored payload, the results it got).
seen: list[tuple[dict[str, Any], list[Any]]] = []


@job(name="br.square", keep_result=600)
async def square(x: int) -> int:
    return x * x


@job(name="br.plain")
async def plain(x: int) -> int:
    return x  # keeps no result: not listed


@job(name="br.fails", retry=0, keep_result=600)
async def fails(x: int) -> None:
    raise RuntimeError(f"member {x} broke")


@job(name="br.gather")
async def gather(values: list[Any]) -> int:
    seen.append((current_job().payload, values))
    return len(values)


@job(name="br.collect")
async def collect(tag: str) -> None:
    """A batch callback: reads its own batch's results."""
    values = [value async for value in batch_results()]
    seen.append((current_job().payload, values))


@job(name="br.gather_sync")
def gather_sync(values: list[Any], tag: str) -> None:
    """A plain def (run in a thread): its arguments are read before the thread starts."""
    seen.append(({"tag": tag}, values))


ALL: list[JobFunction[Any, Any]] = [square, plain, fails, gather, collect, gather_sync]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    seen.clear()


async def _done(client: Client, bid: str) -> bool:
    status = await client.batch_status(bid)
    return status is not None and status["state"] in ("success", "complete", "dead")


async def _seen(count: int) -> bool:
    return len(seen) >= count


async def test_a_chord_of_2000_gets_every_result_in_order_from_a_small_payload(
    settings: Settings, keys: Keys
) -> None:
    n = 2_000
    async with (
        Client(settings) as client,
        Worker(settings.model_copy(update={"concurrency": 20}), jobs=ALL),
    ):
        flow = await client.enqueue_flow(
            chord(group(square.args(i) for i in range(n)), gather.args())
        )
        assert await flow.last.result(timeout=120) == n
        assert await client.redis.llen(keys.batch_results(flow.bids[0])) == n
    [(payload, values)] = seen
    assert values == [i * i for i in range(n)]
    # The reference, not the list: the payload is the size of one job's.
    assert payload["results_of"] == {"bid": flow.bids[0], "count": n}
    assert payload["args"] == []
    assert len(orjson.dumps(payload)) < 1_000
    assert len(orjson.dumps(values)) > 10_000  # what it would have carried


async def test_a_plain_batch_results_come_back_in_member_order(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        async with client.batch() as b:
            await b.enqueue_many(square, [(i,) for i in range(1_234)])
            await b.enqueue(plain, 7)  # keeps no result: not listed
            await b.enqueue(square, 10_000)
        await wait_for(lambda: _done(client, b.bid), timeout=120)
        values = [value async for value in client.batch_results(b.bid)]
        assert values == [i * i for i in range(1_234)] + [10_000**2]
        # None for a batch that lists nothing, or is gone.
        assert [value async for value in client.batch_results("no-such-batch")] == []


async def test_members_kept_by_the_settings_keep_result_are_listed(settings: Settings) -> None:
    """``keep_result`` set for every job (client and worker alike): a member that
    asks nothing itself keeps its result, and the batch lists it."""
    keeping = settings.model_copy(update={"keep_result": 600.0})
    async with Client(keeping) as client, Worker(keeping, jobs=ALL):
        async with client.batch() as b:
            await b.enqueue_many(plain, [(i,) for i in range(5)])
            await b.enqueue(plain, 99)
        await wait_for(lambda: _done(client, b.bid), timeout=60)
        assert [value async for value in client.batch_results(b.bid)] == [0, 1, 2, 3, 4, 99]


async def test_a_callback_reads_its_batch_and_a_second_run_reads_the_same(
    settings: Settings, keys: Keys
) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        async with client.batch(on_complete=collect.args("done")) as b:
            await b.enqueue_many(square, [(i,) for i in range(30)])
        await wait_for(lambda: _seen(1), timeout=60)
        payload, first = seen[0]
        assert payload["batch_callback"] == {"bid": b.bid, "event": "complete"}
        assert first == [i * i for i in range(30)]
        # A duplicate run (at-least-once: the same payload run again) reads the same.
        await client.redis.lpush(keys.queue("default"), orjson.dumps(payload))
        await wait_for(lambda: _seen(2), timeout=60)
        assert seen[1][1] == first


async def test_a_chords_callback_run_twice_gets_the_same_list(
    settings: Settings, keys: Keys
) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        flow = await client.enqueue_flow(
            chord(group(square.args(i) for i in range(12)), gather.args())
        )
        assert await flow.last.result(timeout=60) == 12
        payload, first = seen[0]
        await client.redis.lpush(keys.queue("default"), orjson.dumps(payload))
        await wait_for(lambda: _seen(2), timeout=60)
    assert seen[1][1] == first == [i * i for i in range(12)]


async def test_failed_and_missing_results_read_as_none(settings: Settings, keys: Keys) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        # A chord run anyway past a failed member: None in its place.
        members = [square.args(0), fails.args(1), square.args(2)]
        flow = await client.enqueue_flow(
            chord(group(members), step(gather.args(), if_failed="run"))
        )
        assert await flow.last.result(timeout=60) == 3
        assert seen[-1][1] == [0, None, 4]
        # A plain batch: the failed member, and one whose result expired.
        async with client.batch() as b:
            jids = await b.enqueue_many(square, [(1,), (2,), (3,)])
            await b.enqueue(fails, 9)
        await wait_for(lambda: _done(client, b.bid), timeout=60)
        await client.redis.delete(keys.result(jids[1]))  # as its keep_result ran out
        assert [value async for value in client.batch_results(b.bid)] == [1, None, 9, None]
        # The chord's callback again, after the group's results list expired:
        # as many results as the group had, each None (as a copied list of
        # expired results read).
        payload = seen[-1][0]
        await client.redis.delete(keys.batch_results(flow.bids[0]))
        await client.redis.lpush(keys.queue("default"), orjson.dumps(payload))
        await wait_for(lambda: _seen(2), timeout=60)
        assert seen[-1][1] == [None, None, None]


async def test_a_reference_pushed_by_hand_is_resolved_for_any_handler(
    settings: Settings, keys: Keys
) -> None:
    """A payload naming ``results_of`` (the wire field), with no result kept and no
    middleware (the worker's shortest path), for an async and a plain def."""
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        async with client.batch() as b:
            await b.enqueue_many(square, [(i,) for i in range(5)])
        await wait_for(lambda: _done(client, b.bid), timeout=60)
        reference = {"bid": b.bid, "count": 5}
        for name, args in (("br.gather", []), ("br.gather_sync", ["t"])):
            body = {
                "jid": new_jid(),
                "class": name,
                "args": args,
                "queue": "default",
                "created_at": 1.0,
                "enqueued_at": 1.0,
                "results_of": reference,
            }
            await client.redis.lpush(keys.queue("default"), orjson.dumps(body))
        await wait_for(lambda: _seen(2), timeout=60)
    assert sorted(str(s[0].get("tag")) for s in seen) == ["None", "t"]
    assert [s[1] for s in seen] == [[0, 1, 4, 9, 16]] * 2


async def test_a_group_over_two_queues_and_past_a_chunk_keeps_its_order(
    settings: Settings, keys: Keys
) -> None:
    """A stage is added in the group's order, a chunk a call, split where the queue
    changes: the callback's list is the group's order, not the queues'."""
    on_a = square.options(queue="a")
    steps = [(on_a if i % 7 == 0 else square).args(i) for i in range(1_100)]
    both = settings.model_copy(update={"queues": ("default", "a")})
    async with Client(settings) as client, Worker(both, jobs=ALL):
        flow = await client.enqueue_flow(chord(group(steps), gather.args()))
        assert await flow.last.result(timeout=120) == 1_100
    assert seen[-1][1] == [i * i for i in range(1_100)]
