"""Batches end to end: a worker runs the members, the callbacks run exactly once.

All succeed (on_success and on_complete, once each); a member dies (on_death
at once, on_complete at the end, no on_success); a member that fails, then
succeeds on its retry, is still a success; members added by a running member
keep the batch going until they end; ``abort_batch`` ends a batch whose
member hangs; a child batch counts as one member of its parent; and the
mistakes a caller can make are one clear error that writes nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async import BatchGone, Client, JobFunction, Settings, Worker, current_job, job
from cogworker_async.client.batches import MEMBERS_CHUNK, Batch
from cogworker_async.jobs import JobArgs
from cogworker_async.keys import Keys
from tests.helpers import wait_for
from tests.integration.test_cli import cli, one_error

pytestmark = pytest.mark.anyio

ran: list[str] = []
callbacks: list[tuple[str, str, str]] = []  # (tag, bid, event)
tries: dict[str, int] = {}
hang_started: dict[str, anyio.Event] = {}
client_settings: list[Settings] = []


@job(name="bt.work")
async def work(tag: str) -> str:
    ran.append(tag)
    return tag


@job(name="bt.dies", retry=0)
async def dies(tag: str) -> None:
    ran.append(tag)
    raise RuntimeError("no luck")


@job(name="bt.flaky", retry=3, retry_in=lambda count, exc, job: 0.1)
async def flaky(tag: str) -> None:
    tries[tag] = tries.get(tag, 0) + 1
    if tries[tag] == 1:
        raise RuntimeError("first try fails")
    ran.append(tag)


@job(name="bt.fans_out")
async def fans_out(n: int) -> None:
    """A member that adds ``n`` more members to its own batch while it runs."""
    bid = current_job().batch
    assert bid is not None
    async with Client(client_settings[0]) as client:
        adder = client.batch_of(bid)
        for i in range(n):
            await adder.enqueue(work, f"fanned-{i}")
    ran.append("fans_out")


@job(name="bt.hangs")
async def hangs() -> None:
    hang_started["hangs"].set()
    await anyio.sleep_forever()


@job(name="bt.callback")
async def on_event(tag: str) -> None:
    field = current_job().payload["batch_callback"]
    callbacks.append((tag, field["bid"], field["event"]))


ALL: list[JobFunction[Any, Any]] = [work, dies, flaky, fans_out, hangs, on_event]


@pytest.fixture(autouse=True)
def _fresh(settings: Settings) -> None:
    ran.clear()
    callbacks.clear()
    tries.clear()
    hang_started.clear()
    client_settings[:] = [settings]


async def _done(client: Client, bid: str) -> bool:
    status = await client.batch_status(bid)
    return status is not None and status["state"] in ("success", "complete", "dead")


async def _counted(client: Client, bid: str, count: int) -> bool:
    status = await client.batch_status(bid)
    return status is not None and status["succeeded"] >= count


async def _ran(count: int) -> bool:
    return len(ran) >= count


async def _callbacks_settled(count: int) -> bool:
    await asyncio.sleep(0)
    return len(callbacks) >= count


async def test_every_member_succeeds_then_success_and_complete_run_once(
    settings: Settings,
) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        batch = client.batch(
            on_success=on_event.args("ok"),
            on_complete=on_event.args("all"),
            on_death=on_event.args("dead"),
            description="five",
        )
        async with batch as b:
            for i in range(4):
                await b.enqueue(work, f"m{i}")
            assert await b.enqueue_many(work, [("m4",)]) != []
            # Open: every member has ended, yet nothing fires before the block ends.
            # (Waited for by the counts: a handler returns before its ack lands.)
            await wait_for(lambda: _counted(client, b.bid, 5), timeout=30)
            status = await client.batch_status(b.bid)
            assert status is not None
            assert (status["state"], status["pending"], status["succeeded"]) == ("open", 0, 5)
            await anyio.sleep(0.3)
            assert callbacks == []
        await wait_for(lambda: _callbacks_settled(2), timeout=30)
        await wait_for(lambda: _done(client, b.bid), timeout=30)
        status = await client.batch_status(b.bid)
        assert status is not None
        assert status["state"] == "success"
        assert (status["total"], status["pending"], status["succeeded"]) == (5, 0, 5)
        assert status["description"] == "five"
        assert status["callbacks"] == {
            "success": "enqueued",
            "complete": "enqueued",
            "death": "waiting",
        }
        await anyio.sleep(0.5)  # a second firing would have had time to run
    assert sorted(ran) == [f"m{i}" for i in range(5)]
    assert sorted(callbacks) == [("all", b.bid, "complete"), ("ok", b.bid, "success")]


async def test_a_dead_member_fires_death_then_complete_never_success(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        async with client.batch(
            on_success=on_event.args("ok"),
            on_complete=on_event.args("all"),
            on_death=on_event.args("dead"),
        ) as b:
            await b.enqueue(work, "fine")
            await b.enqueue(dies, "doomed")
        await wait_for(lambda: _callbacks_settled(2), timeout=30)
        status = await client.batch_status(b.bid)
        assert status is not None
        assert status["state"] == "dead"
        assert (status["succeeded"], status["dead"], status["pending"]) == (1, 1, 0)
    assert sorted(callbacks) == [("all", b.bid, "complete"), ("dead", b.bid, "death")]


async def test_a_retried_member_stays_pending_and_succeeds(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        async with client.batch(on_success=on_event.args("ok")) as b:
            await b.enqueue(flaky, "second-time")
        await wait_for(lambda: _callbacks_settled(1), timeout=30)
        status = await client.batch_status(b.bid)
        assert status is not None
        assert status["state"] == "success"
    assert tries == {"second-time": 2}
    assert callbacks == [("ok", b.bid, "success")]


async def test_members_added_by_a_running_member_are_waited_for(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        async with client.batch(on_complete=on_event.args("all")) as b:
            await b.enqueue(fans_out, 3)
        await wait_for(lambda: _callbacks_settled(1), timeout=30)
        status = await client.batch_status(b.bid)
        assert status is not None
        assert (status["total"], status["succeeded"], status["state"]) == (4, 4, "success")
    # The callback ran after every member it waited for.
    assert sorted(ran) == ["fanned-0", "fanned-1", "fanned-2", "fans_out"]


async def test_abort_batch_ends_a_batch_whose_member_hangs(settings: Settings) -> None:
    hang_started["hangs"] = anyio.Event()
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        async with client.batch(
            on_success=on_event.args("ok"), on_complete=on_event.args("all")
        ) as b:
            await b.enqueue(hangs)
            waiting = await b.enqueue(work.options(delay=600), "never")
        assert waiting is not None
        with anyio.fail_after(20):
            await hang_started["hangs"].wait()
        assert await client.abort_batch(b.bid) == 2
        await wait_for(lambda: _callbacks_settled(1), timeout=30)
        status = await client.batch_status(b.bid)
        assert status is not None
        assert (status["state"], status["failed"], status["pending"]) == ("complete", 2, 0)
    assert callbacks == [("all", b.bid, "complete")]
    assert "never" not in ran


async def test_a_child_batch_is_one_member_of_its_parent(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        async with client.batch(on_complete=on_event.args("parent")) as parent:
            await parent.enqueue(work, "outer")
            async with parent.batch(on_complete=on_event.args("child")) as child:
                await child.enqueue(work, "inner-1")
                await child.enqueue(work, "inner-2")
        await wait_for(lambda: _callbacks_settled(2), timeout=30)
        status = await client.batch_status(parent.bid)
        child_status = await client.batch_status(child.bid)
        assert status is not None
        assert child_status is not None
        assert (status["total"], status["succeeded"], status["state"]) == (2, 2, "success")
        assert child_status["parent"] == parent.bid
    # The child ended before its parent could.
    assert [tag for tag, _, _ in callbacks] == ["child", "parent"]


async def test_mistakes_are_one_clear_error_and_write_nothing(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        with pytest.raises(TypeError, match=r"job\.args\(\.\.\.\), naming the job"):
            async with client.batch(on_complete=JobArgs(("x",), {})):
                pass
        with pytest.raises(TypeError, match=r"expected job\.args"):
            async with client.batch(on_complete=42):  # type: ignore[arg-type]
                pass
        assert await redis.zcard(keys.batches) == 0  # no batch was opened
        with pytest.raises(BatchGone, match="gone or over"):
            await client.batch_of("f" * 24).enqueue(work, "lost")
        async with client.batch() as b:
            with pytest.raises(ValueError, match="unique job"):
                await b.enqueue(work.options(unique="until_executed"), "u")
        assert await redis.llen(keys.queue("default")) == 0
        assert await client.batch_status("0" * 24) is None
        # The batch is over (it was empty): no member joins it later.
        with pytest.raises(BatchGone):
            await client.batch_of(b.bid).enqueue(work, "late")
        assert await redis.llen(keys.queue("default")) == 0


async def test_the_batches_commands_list_and_show(settings: Settings) -> None:
    async with Client(settings) as client:
        async with client.batch(on_complete=on_event.args("all"), description="import 42") as b:
            member = await b.enqueue(work, "queued")
        assert member is not None
        listed = await anyio.to_thread.run_sync(cli, settings, "batches", "list")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines() == [
            f"{b.bid}\trunning\t0 ok, 0 failed, 0 dead, 1 pending of 1\timport 42"
        ]
        shown = await anyio.to_thread.run_sync(cli, settings, "batches", "show", b.bid, "--json")
        assert shown.returncode == 0, shown.stderr
        found = json.loads(shown.stdout)
        assert found["pending_members"] == [member.jid]
        assert found["callbacks"] == {"complete": "waiting"}
        missing = await anyio.to_thread.run_sync(cli, settings, "batches", "show", "0" * 24)
        assert one_error(missing, 1) == f"error: no batch {'0' * 24}"


async def test_basic_fetch_counts_a_members_success_too(settings: Settings) -> None:
    """A basic-fetch ack settles no hold: the member's success is counted by a call
    of its own (batch_member_end.lua), so the batch still ends and calls back."""
    basic = settings.model_copy(update={"fetch": "basic"})
    async with Client(basic) as client, Worker(basic, jobs=ALL):
        async with client.batch(
            on_success=on_event.args("ok"), on_complete=on_event.args("all")
        ) as b:
            await b.enqueue(work, "basic-1")
            await b.enqueue(dies, "basic-2")
        await wait_for(lambda: _callbacks_settled(1), timeout=30)
        status = await client.batch_status(b.bid)
        assert status is not None
        assert (status["state"], status["succeeded"], status["dead"]) == ("dead", 1, 1)
    assert callbacks == [("all", b.bid, "complete")]


async def test_enqueue_stream_sends_a_generator_chunk_by_chunk_keeping_nothing(
    settings: Settings,
) -> None:
    """A million-member batch is streamed: each chunk is sent before the next item
    is read, and no jid is kept (bench/batch_big.py measures the memory)."""
    size_when_read: dict[int, int] = {}
    count = 2 * MEMBERS_CHUNK + 7

    async with Client(settings) as client:

        def items(b: Batch) -> Iterator[tuple[str]]:
            for i in range(count):
                size_when_read[i] = b.size
                yield (f"s{i}",)

        async with client.batch() as b:
            added = await b.enqueue_stream(work, items(b))
        status = await client.batch_status(b.bid)
    assert added == count
    assert size_when_read[MEMBERS_CHUNK - 1] == 0
    assert size_when_read[MEMBERS_CHUNK] == MEMBERS_CHUNK  # the first chunk went first
    assert size_when_read[2 * MEMBERS_CHUNK] == 2 * MEMBERS_CHUNK
    assert status is not None
    assert (status["state"], status["total"], status["pending"]) == ("running", count, count)
