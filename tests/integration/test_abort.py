"""Abort: ``Client.abort``, ``handle.abort()`` and ``cogworker-async abort JID``.

A queued, a scheduled and a retrying job are removed (they never run); a
running ``async def`` is cancelled by its process and a running plain ``def``
is filed as aborted when its thread returns, neither retried; two aborts of
one job; an abort racing the job's own completion ends the job one way only;
an unknown or finished jid says so; an abort sent while no listener heard it
arrives through the tombstones within a beat.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async import (
    AbortOutcome,
    Client,
    JobAborted,
    JobFailed,
    JobFunction,
    JobHandle,
    Settings,
    Worker,
    job,
)
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from tests.faultproxy import FaultProxy
from tests.helpers import wait_for
from tests.integration.test_cli import cli, one_error

pytestmark = pytest.mark.anyio

ran: list[str] = []
cancelled: list[str] = []
started: dict[str, anyio.Event] = {}  # set per test: an Event belongs to one loop
thread_gate = threading.Event()
thread_started = threading.Event()


@job(name="ab.record", status=True, keep_result=60)
async def record(tag: str) -> str:
    ran.append(tag)
    return tag


@job(name="ab.hangs", status=True, keep_result=60)
async def hangs() -> None:
    started["hangs"].set()
    try:
        await anyio.sleep_forever()
    except asyncio.CancelledError:
        cancelled.append("hangs")
        raise


@job(name="ab.swallows")
async def swallows() -> str:
    """A handler that swallows the cancellation: still filed as aborted."""
    started["swallows"].set()
    try:
        await anyio.sleep_forever()
    except asyncio.CancelledError:
        cancelled.append("swallows")
    return "ignored the abort"


@job(name="ab.blocking", status=True)
def blocking() -> str:
    thread_started.set()
    thread_gate.wait(30)
    ran.append("blocking")
    return "done"


@job(name="ab.flaky", retry=3, retry_in=lambda count, exc, job: 600)
async def flaky() -> None:
    raise RuntimeError("later")


@job(name="ab.quick", status=True)
async def quick(pause: float) -> None:
    await asyncio.sleep(pause)


@job(name="ab.unique", unique="until_executed")
async def unique_hangs(account: int) -> None:
    started["unique"].set()
    await anyio.sleep_forever()


ALL: list[JobFunction[Any, Any]] = [record, hangs, swallows, blocking, flaky, quick, unique_hangs]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()
    cancelled.clear()
    started.clear()
    thread_gate.clear()
    thread_started.clear()


async def _count(redis: Redis, key: str) -> int:
    return int(await redis.get(key) or 0)


async def _state(client: Client, jid: str) -> str | None:
    found = await client.status(jid)
    return None if found is None else found.state


async def _nothing_in_progress(redis: Redis, keys: Keys) -> bool:
    lists = [k async for k in redis.scan_iter(match=keys.in_progress_prefix + "*")]
    for key in lists:
        if await redis.llen(key):
            return False
    return True


async def test_a_queued_job_is_removed_and_never_runs(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        first = await client.enqueue(record, "first")
        victim = await client.enqueue(record, "victim")
        last = await client.enqueue(record, "last")
        assert first is not None
        assert victim is not None
        assert last is not None
        assert await victim.abort() is AbortOutcome.REMOVED
        assert await _state(client, victim.jid) == "aborted"
        with pytest.raises(JobAborted) as caught:
            await victim.result(timeout=5)
        assert isinstance(caught.value, JobFailed)
        assert caught.value.error_class == "JobAborted"
        async with Worker(settings, jobs=ALL):
            assert await last.result(timeout=10) == "last"
            assert await first.result(timeout=10) == "first"
        assert sorted(ran) == ["first", "last"]
        # Twice: the second says it is over.
        assert await client.abort(victim.jid) is AbortOutcome.FINISHED
    assert await _count(redis, keys.stat("aborted")) == 1


async def test_a_scheduled_job_is_removed(settings: Settings, redis: Redis, keys: Keys) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(record.options(delay=300), "later")
        assert handle is not None
        assert await redis.zcard(keys.schedule) == 1
        assert await client.abort(handle.jid) is AbortOutcome.REMOVED
        assert await redis.zcard(keys.schedule) == 0
        assert await _state(client, handle.jid) == "aborted"


async def test_a_retrying_job_is_removed(settings: Settings, redis: Redis, keys: Keys) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(flaky)
        assert handle is not None
        async with Worker(settings, jobs=ALL):

            async def in_retry() -> bool:
                return int(await redis.zcard(keys.retry)) == 1

            await wait_for(in_retry)
            assert await handle.abort() is AbortOutcome.REMOVED
        assert await redis.zcard(keys.retry) == 0
        assert await redis.zcard(keys.dead) == 0
        assert await handle.abort() is AbortOutcome.FINISHED


async def test_a_running_async_job_is_cancelled_and_filed_as_aborted(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    started["hangs"] = anyio.Event()
    async with Client(settings) as client, Worker(settings, jobs=ALL) as worker:
        handle = await client.enqueue(hangs)
        assert handle is not None
        with anyio.fail_after(10):
            await started["hangs"].wait()
        assert worker.aborts is not None
        await worker.aborts.subscribed.wait()
        assert await handle.abort() is AbortOutcome.CANCELLING
        with pytest.raises(JobAborted):
            await handle.result(timeout=10)
        assert cancelled == ["hangs"]

        async def settled() -> bool:
            return await _count(redis, keys.stat("aborted")) == 1 and await _nothing_in_progress(
                redis, keys
            )

        await wait_for(settled)
        await wait_for(lambda: _is(client, handle.jid, "aborted"))
        # The worker goes on with other jobs.
        after = await client.enqueue(record, "after")
        assert after is not None
        assert await after.result(timeout=10) == "after"
        assert await handle.abort() is AbortOutcome.FINISHED
    assert await redis.zcard(keys.retry) == 0
    assert await redis.zcard(keys.dead) == 0
    assert await _count(redis, keys.stats_failed) == 0


async def _is(client: Client, jid: str, state: str) -> bool:
    return await _state(client, jid) == state


async def test_a_handler_that_swallows_the_cancel_is_still_filed_as_aborted(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    started["swallows"] = anyio.Event()
    async with Client(settings) as client, Worker(settings, jobs=ALL) as worker:
        handle = await client.enqueue(swallows)
        assert handle is not None
        with anyio.fail_after(10):
            await started["swallows"].wait()
        assert worker.aborts is not None
        await worker.aborts.subscribed.wait()
        assert await handle.abort() is AbortOutcome.CANCELLING

        async def settled() -> bool:
            return await _count(redis, keys.stat("aborted")) == 1

        await wait_for(settled)
        after = await client.enqueue(record, "after")
        assert after is not None
        assert await after.result(timeout=10) == "after"
    assert cancelled == ["swallows"]
    assert await _count(redis, keys.stats_processed) == 1  # "after" only


async def test_a_running_sync_job_is_filed_as_aborted_when_its_thread_returns(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL) as worker:
        handle = await client.enqueue(blocking)
        assert handle is not None
        await anyio.to_thread.run_sync(thread_started.wait, 10)
        assert worker.aborts is not None
        await worker.aborts.subscribed.wait()
        assert await handle.abort() is AbortOutcome.CANCELLING
        assert await _count(redis, keys.stat("aborted")) == 0  # still running: marked
        thread_gate.set()

        async def settled() -> bool:
            return await _count(redis, keys.stat("aborted")) == 1

        await wait_for(settled)
        await wait_for(lambda: _is(client, handle.jid, "aborted"))
    assert ran == ["blocking"]  # a thread can't be stopped: it ran to its end
    assert await redis.zcard(keys.retry) == 0
    assert await _count(redis, keys.stats_processed) == 0


async def test_two_aborts_of_one_running_job(settings: Settings, redis: Redis, keys: Keys) -> None:
    started["hangs"] = anyio.Event()
    async with Client(settings) as client, Worker(settings, jobs=ALL) as worker:
        handle = await client.enqueue(hangs)
        assert handle is not None
        with anyio.fail_after(10):
            await started["hangs"].wait()
        assert worker.aborts is not None
        await worker.aborts.subscribed.wait()
        first, second = await asyncio.gather(handle.abort(), handle.abort())
        assert first is AbortOutcome.CANCELLING
        assert second in (AbortOutcome.CANCELLING, AbortOutcome.FINISHED)

        async def settled() -> bool:
            return await _count(redis, keys.stat("aborted")) == 1 and await _nothing_in_progress(
                redis, keys
            )

        await wait_for(settled)
        assert await handle.abort() is AbortOutcome.FINISHED
    assert cancelled == ["hangs"]
    assert await _count(redis, keys.stat("aborted")) == 1


async def test_abort_racing_completion_ends_each_job_one_way(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    rng = random.Random(7)
    count = 60
    async with Client(settings) as client, Worker(settings, jobs=ALL) as worker:
        assert worker.aborts is not None
        await worker.aborts.subscribed.wait()
        handles = []
        for _ in range(count):
            handle = await client.enqueue(quick, rng.uniform(0.01, 0.15))
            assert handle is not None
            handles.append(handle)

        async def abort_later(handle: JobHandle, delay: float) -> AbortOutcome:
            await asyncio.sleep(delay)  # spread over the jobs' run: queued, running, done
            return await handle.abort()

        outcomes = await asyncio.gather(*(abort_later(h, rng.uniform(0.0, 0.5)) for h in handles))

        async def all_ended() -> bool:
            ended = await _count(redis, keys.stats_processed) + await _count(
                redis, keys.stat("aborted")
            )
            return ended == count and await _nothing_in_progress(redis, keys)

        await wait_for(all_ended, timeout=20)
        states = [await _state(client, h.jid) for h in handles]

        async def statuses_written() -> bool:
            nonlocal states
            states = [await _state(client, h.jid) for h in handles]
            return all(s in ("complete", "aborted") for s in states)

        await wait_for(statuses_written)
    processed = await _count(redis, keys.stats_processed)
    aborted = await _count(redis, keys.stat("aborted"))
    assert processed + aborted == count
    assert states.count("aborted") == aborted
    assert states.count("complete") == processed
    for outcome, state in zip(outcomes, states, strict=True):
        if outcome is AbortOutcome.REMOVED:
            assert state == "aborted"
        if state == "complete":
            assert outcome in (AbortOutcome.CANCELLING, AbortOutcome.FINISHED)
    assert await redis.zcard(keys.retry) == 0
    assert await redis.zcard(keys.dead) == 0
    assert await _count(redis, keys.stats_failed) == 0


async def test_unknown_and_finished_jids_say_so(settings: Settings) -> None:
    async with Client(settings) as client:
        assert await client.abort("f" * 24) is AbortOutcome.NOT_FOUND
        handle = await client.enqueue(record, "done")
        assert handle is not None
        async with Worker(settings, jobs=ALL):
            assert await handle.result(timeout=10) == "done"
        assert await handle.abort() is AbortOutcome.FINISHED


async def test_an_abort_nobody_heard_arrives_with_the_tombstone_check(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    started["hangs"] = anyio.Event()
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        handle = await client.enqueue(hangs)
        assert handle is not None
        with anyio.fail_after(10):
            await started["hangs"].wait()
        # As if the listener had been cut off: the tombstone, without the notification.
        await redis.zadd(keys.aborted, {handle.jid: 1.0e9 * 2})
        with anyio.fail_after(settings.heartbeat_interval * 4 + 2):
            with pytest.raises(JobAborted):
                await handle.result(timeout=None)
    assert cancelled == ["hangs"]


async def test_cli_abort_json_and_human(settings: Settings) -> None:
    async with Client(settings) as client:
        one = await client.enqueue(record, "one")
        two = await client.enqueue(record, "two")
        assert one is not None
        assert two is not None
    done = await anyio.to_thread.run_sync(lambda: cli(settings, "abort", one.jid, "--json"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"jid": one.jid, "outcome": "removed"}
    done = await anyio.to_thread.run_sync(lambda: cli(settings, "abort", two.jid))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"removed: job {two.jid} was waiting; it will never run"
    again = await anyio.to_thread.run_sync(lambda: cli(settings, "abort", two.jid, "--json"))
    assert again.returncode == 1
    assert json.loads(again.stdout) == {"jid": two.jid, "outcome": "finished"}
    unknown = await anyio.to_thread.run_sync(lambda: cli(settings, "abort", "e" * 24))
    assert "not found: no job " + "e" * 24 in one_error(unknown, 1)
    finished = await anyio.to_thread.run_sync(lambda: cli(settings, "abort", two.jid))
    assert "finished: job " in one_error(finished, 1)


async def _listeners(redis: Redis, keys: Keys) -> int:
    reply = await redis.pubsub_numsub(keys.aborts)
    return int(reply[0][1])


@pytest.mark.timeout(60)
async def test_aborts_arrive_across_an_outage_of_the_listener(
    redis_server: EmbeddedRedis, settings: Settings, redis: Redis, keys: Keys
) -> None:
    """Sent while the worker is cut off: arrives once it is back (its listener checks the
    tombstones on subscribing again), well before a slow beat; then heard again at once."""
    slow_beat = {"heartbeat_interval": 5.0, "heartbeat_ttl": 20.0, "orphan_threshold": 40.0}
    with FaultProxy("127.0.0.1", redis_server.port or 0) as proxy:
        cut_off = settings.model_copy(update={"redis_url": proxy.url, **slow_beat})
        started["hangs"] = anyio.Event()
        async with Client(settings) as client, Worker(cut_off, jobs=ALL) as worker:
            assert worker.aborts is not None
            await worker.aborts.subscribed.wait()
            first = await client.enqueue(hangs)
            assert first is not None
            with anyio.fail_after(10):
                await started["hangs"].wait()
            proxy.refuse(True)

            async def nobody_listens() -> bool:
                return await _listeners(redis, keys) == 0

            await wait_for(nobody_listens)
            assert await first.abort() is AbortOutcome.CANCELLING
            proxy.heal()
            with anyio.fail_after(4), pytest.raises(JobAborted):
                await first.result(timeout=None)
            started["hangs"] = anyio.Event()
            second = await client.enqueue(hangs)
            assert second is not None
            with anyio.fail_after(10):
                await started["hangs"].wait()

            async def listening() -> bool:
                return await _listeners(redis, keys) == 1

            await wait_for(listening)
            assert await second.abort() is AbortOutcome.CANCELLING
            with anyio.fail_after(2), pytest.raises(JobAborted):
                await second.result(timeout=None)
    assert cancelled == ["hangs", "hangs"]


async def test_a_fetched_job_waiting_for_a_processor_is_never_run(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    """One processor, busy: the next job waits on the in-progress list (prefetched). Its
    abort is remembered by the worker, and the job is filed as aborted, never run."""
    started["hangs"] = anyio.Event()
    one = settings.model_copy(update={"concurrency": 1, "prefetch": 1})
    async with Client(settings) as client, Worker(one, jobs=ALL) as worker:
        assert worker.aborts is not None
        await worker.aborts.subscribed.wait()
        busy = await client.enqueue(hangs)
        waiting = await client.enqueue(record, "never")
        assert busy is not None
        assert waiting is not None
        with anyio.fail_after(10):
            await started["hangs"].wait()

        async def prefetched() -> bool:
            return await redis.llen(keys.queue("default")) == 0

        await wait_for(prefetched)
        assert await waiting.abort() is AbortOutcome.CANCELLING
        assert await busy.abort() is AbortOutcome.CANCELLING
        with pytest.raises(JobAborted):
            await waiting.result(timeout=10)

        async def both_settled() -> bool:
            return await _count(redis, keys.stat("aborted")) == 2 and await _nothing_in_progress(
                redis, keys
            )

        await wait_for(both_settled)
    assert ran == []
    assert await _count(redis, keys.stats_processed) == 0


async def test_an_aborted_unique_job_releases_its_lock(settings: Settings, redis: Redis) -> None:
    """Aborted is terminal: waiting or running, the job's unique lock goes with
    it, so the same job can be enqueued again at once (not after the lock's TTL)."""
    async with Client(settings) as client:
        waiting = await client.enqueue(unique_hangs, 1)
        assert waiting is not None
        assert not waiting.duplicate
        assert await waiting.abort() is AbortOutcome.REMOVED
        again = await client.enqueue(unique_hangs, 1)
        assert again is not None
        assert not again.duplicate
        started["unique"] = anyio.Event()
        async with Worker(settings, jobs=ALL) as worker:
            with anyio.fail_after(10):
                await started["unique"].wait()
            assert (await client.enqueue(unique_hangs, 1)).duplicate  # type: ignore[union-attr]
            assert worker.aborts is not None
            await worker.aborts.subscribed.wait()
            assert await again.abort() is AbortOutcome.CANCELLING

            async def enqueued_anew() -> bool:
                third = await client.enqueue(unique_hangs, 1)
                assert third is not None
                if third.duplicate:
                    return False
                assert await third.abort() is not AbortOutcome.NOT_FOUND
                return True

            await wait_for(enqueued_anew)

            async def no_lock_left() -> bool:
                return not await redis.keys("*unique:ab.unique*")

            await wait_for(no_lock_left)  # the third, aborted too, released its own


async def test_a_wrong_typed_queue_before_the_target_is_passed_over(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 21 item 7: a queue key of the wrong type that sorts before the job's own
    queue is skipped with one warning naming it (not a raw WRONGTYPE), and the job is
    still found and removed; a wrong-typed dead set never hides "not found"."""
    await redis.set(keys.queue("aaa"), "not a list")
    await redis.sadd(keys.queues, "aaa")
    await redis.set(keys.dead, "not a sorted set")
    async with Client(settings) as client:
        one = await client.enqueue(record, "one")
        two = await client.enqueue(record, "two")
        assert one is not None
        assert two is not None
        assert await client.abort(one.jid) is AbortOutcome.REMOVED
        assert await client.abort("f" * 24) is AbortOutcome.NOT_FOUND
    assert any(keys.queue("aaa") in r.getMessage() for r in caplog.records)
    done = await anyio.to_thread.run_sync(lambda: cli(settings, "abort", two.jid, "--json"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"jid": two.jid, "outcome": "removed"}
    assert "WRONGTYPE" not in done.stdout
    assert await redis.llen(keys.queue("default")) == 0
    assert await redis.get(keys.queue("aaa")) == b"not a list"  # left for the key guard


@pytest.mark.timeout(60)
async def test_a_message_that_is_not_utf8_leaves_the_listener_listening(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 21 item 7: a non-UTF-8 message on the abort channel is one warning line,
    no traceback, and the listener hears the next abort at once (the slow beat's
    tombstone check can't stand in for it)."""
    slow_beat = {"heartbeat_interval": 5.0, "heartbeat_ttl": 20.0, "orphan_threshold": 40.0}
    slow = settings.model_copy(update=slow_beat)
    started["hangs"] = anyio.Event()
    async with Client(slow) as client, Worker(slow, jobs=ALL) as worker:
        assert worker.aborts is not None
        await worker.aborts.subscribed.wait()
        handle = await client.enqueue(hangs)
        assert handle is not None
        with anyio.fail_after(10):
            await started["hangs"].wait()
        assert await redis.publish(keys.aborts, b"\xff\xfe not utf-8") == 1
        assert await handle.abort() is AbortOutcome.CANCELLING
        # Heard by the listener: well under its shortest pause after a failure (1 s).
        with anyio.fail_after(0.9), pytest.raises(JobAborted):
            await handle.result(timeout=None)
    assert cancelled == ["hangs"]
    ignored = [r for r in caplog.records if "not UTF-8" in r.getMessage()]
    assert len(ignored) == 1
    assert keys.aborts in ignored[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info and "bort" in r.getMessage()]
