"""Job status: ``Client.status``, ``handle.status()`` and ``cogworker-async status JID``.

Through queued/scheduled, working, complete, retrying, dead and failed
(discarded); by job option and by setting; and a status write failing (the
key of the wrong type) while the job still succeeds, logged once.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, JobFunction, Settings, Worker, job, payload
from cogworker_async.client.tracking import JobStatus
from cogworker_async.keys import Keys
from tests.helpers import wait_for
from tests.integration.test_cli import cli, one_error

pytestmark = pytest.mark.anyio

gates: dict[str, anyio.Event] = {}  # set per test: an Event belongs to one loop


@job(name="st.ok", status=True)
async def ok() -> None:
    pass


@job(name="st.slow", status=True)
async def slow() -> None:
    await gates["slow"].wait()


@job(name="st.flaky", status=True, retry=3, retry_in=lambda count, exc, job: 600)
async def flaky() -> None:
    raise RuntimeError("try later")


@job(name="st.dies", status=True, retry=0)
async def dies() -> None:
    raise ValueError("no hope")


@job(name="st.dropped", status=True, retry=False)
async def dropped() -> None:
    raise LookupError("not worth keeping")


@job(name="st.plain")
async def plain() -> None:
    pass


@job(name="st.with_result", status=True, keep_result=60)
async def with_result() -> str:
    return "done"


ALL: list[JobFunction[Any, Any]] = [ok, slow, flaky, dies, dropped, plain, with_result]


async def _state_is(client: Client, jid: str, state: str) -> bool:
    found = await client.status(jid)
    return found is not None and found.state == state


async def test_status_queued_working_complete(settings: Settings) -> None:
    gates["slow"] = anyio.Event()
    async with Client(settings) as client:
        handle = await client.enqueue(slow)
        assert handle is not None
        await wait_for(lambda: _state_is(client, handle.jid, "queued"))
        before = time.time()
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _state_is(client, handle.jid, "working"))
            gates["slow"].set()
            await wait_for(lambda: _state_is(client, handle.jid, "complete"))
        found = await handle.status()
    assert isinstance(found, JobStatus)
    assert (found.jid, found.job_class, found.queue) == (handle.jid, "st.slow", "default")
    assert found.started_at is not None
    assert found.finished_at is not None
    assert before <= found.started_at <= found.finished_at
    assert found.enqueued_at is not None
    assert found.enqueued_at <= found.started_at
    assert found.error_class is None


async def test_status_scheduled_with_its_due_time(settings: Settings) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(ok.options(delay=300))
        assert handle is not None
        await wait_for(lambda: _state_is(client, handle.jid, "scheduled"))
        found = await client.status(handle.jid)
    assert found is not None
    assert found.run_at is not None
    assert found.run_at > time.time() + 250


async def test_status_retrying_dead_and_discarded(settings: Settings) -> None:
    async with Client(settings) as client:
        retried = await client.enqueue(flaky)
        dead = await client.enqueue(dies)
        gone = await client.enqueue(dropped)
        assert retried is not None
        assert dead is not None
        assert gone is not None
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _state_is(client, retried.jid, "retrying"))
            await wait_for(lambda: _state_is(client, dead.jid, "dead"))
            await wait_for(lambda: _state_is(client, gone.jid, "failed"))
        r, d, g = [await client.status(h.jid) for h in (retried, dead, gone)]
    assert r is not None
    assert d is not None
    assert g is not None
    assert (r.error_class, r.error_message) == ("RuntimeError", "try later")
    assert r.run_at is not None
    assert r.run_at > time.time() + 500
    assert (d.error_class, d.error_message) == ("ValueError", "no hope")
    assert d.finished_at is not None
    assert (g.error_class, g.error_message) == ("LookupError", "not worth keeping")


async def test_status_tracking_setting_tracks_every_job(settings: Settings) -> None:
    tracked = settings.model_copy(update={"status_tracking": True})
    async with Client(tracked) as client:
        handle = await client.enqueue(plain)
        opted_out = await client.enqueue(plain.options(status=False))
        assert handle is not None
        assert opted_out is not None
        async with Worker(tracked, jobs=ALL):
            await wait_for(lambda: _state_is(client, handle.jid, "complete"))
        assert await client.status(opted_out.jid) is None
        assert await client.status("0" * 24) is None


async def test_a_failing_status_write_never_fails_the_job(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    jids = []
    for _ in range(2):
        job = payload.build("st.with_result", [], None, "default", now=time.time())
        job["status"] = True
        jids.append(job["jid"])
        # Every status write to it is refused (WRONGTYPE).
        await redis.set(keys.status(job["jid"]), "not a hash")
        await redis.lpush(keys.queue("default"), payload.encode(job))
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        assert [await client.result(j, timeout=10) for j in jids] == ["done", "done"]

        async def both_acked() -> bool:
            return int(await redis.get(keys.stats_processed) or 0) == 2

        await wait_for(both_acked)
        await wait_for(lambda: _logged_status_failure(caplog))
    assert await redis.zcard(keys.retry) == 0
    assert await redis.zcard(keys.dead) == 0
    failing = [r for r in caplog.records if r.getMessage().startswith("Status: failing")]
    assert len(failing) == 1, [r.getMessage() for r in failing]  # once per episode
    assert "WRONGTYPE" in failing[0].getMessage()


async def _logged_status_failure(caplog: pytest.LogCaptureFixture) -> bool:
    return any(r.getMessage().startswith("Status: failing") for r in caplog.records)


async def test_cli_status_prints_it_or_one_error(settings: Settings) -> None:
    async with Client(settings) as client:
        handle = await client.enqueue(dies)
        assert handle is not None
        async with Worker(settings, jobs=ALL):
            await wait_for(lambda: _state_is(client, handle.jid, "dead"))
    done = await anyio.to_thread.run_sync(lambda: cli(settings, "status", handle.jid))
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(None, 1) for line in done.stdout.splitlines())
    assert lines["state"] == "dead"
    assert lines["job_class"] == "st.dies"
    assert lines["error_class"] == "ValueError"
    assert lines["error_message"] == "no hope"
    assert lines["place"] == "dead"  # the lifecycle table's place of the dead state
    unknown = await anyio.to_thread.run_sync(lambda: cli(settings, "status", "f" * 24))
    assert "no status for job " + "f" * 24 in one_error(unknown, 1)


async def test_status_through_abort_queued_and_running(settings: Settings) -> None:
    gates["slow"] = anyio.Event()  # never set: only the abort ends it
    async with Client(settings) as client:
        waiting = await client.enqueue(ok.options(delay=300))
        assert waiting is not None
        await wait_for(lambda: _state_is(client, waiting.jid, "scheduled"))
        assert (await waiting.abort()).value == "removed"
        await wait_for(lambda: _state_is(client, waiting.jid, "aborted"))
        running = await client.enqueue(slow)
        assert running is not None
        async with Worker(settings, jobs=ALL) as worker:
            await wait_for(lambda: _state_is(client, running.jid, "working"))
            assert worker.aborts is not None
            await worker.aborts.subscribed.wait()
            assert (await running.abort()).value == "cancelling"
            await wait_for(lambda: _state_is(client, running.jid, "aborted"))
        found = await running.status()
    assert found is not None
    assert found.started_at is not None
    assert found.finished_at is not None
    assert found.started_at <= found.finished_at
