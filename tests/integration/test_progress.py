"""``current_job().progress(...)`` with a real worker: seen in ``Client.status``
(``status["progress"]`` as SPEC writes it), in ``cogworker-async status JID`` and
kept by the final status; rapid reports coalesced (the writes counted by Redis's
own keyspace notifications, not timed); bad values refused naming the argument.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async import (
    Client,
    JobFunction,
    Settings,
    Worker,
    context,
    current_job,
    job,
    payload,
)
from cogworker_async.context import PROGRESS_MESSAGE_MAX, PROGRESS_WRITES_PER_S
from cogworker_async.keys import Keys
from tests.helpers import wait_for
from tests.integration.test_cli import cli

pytestmark = pytest.mark.anyio

gates: dict[str, anyio.Event] = {}  # set per test: an Event belongs to one loop
seen: dict[str, Any] = {}  # what a handler measured or caught, for the test to check
REPORTS = 5000


@job(name="pg.halfway", status=True)
async def halfway() -> None:
    current_job().progress(0.4, "resized 40 of 100")
    await gates["halfway"].wait()


@job(name="pg.rapid", status=True, keep_result=60)
async def rapid() -> str:
    started = time.monotonic()
    for done in range(1, REPORTS + 1):
        current_job().progress(done / REPORTS, f"{done} of {REPORTS}")
        if done % 5 == 0:
            await asyncio.sleep(0.001)  # a handler that does some work between reports
    seen["rapid_took"] = time.monotonic() - started
    return "ok"


@job(name="pg.threaded", status=True, keep_result=60)
def threaded() -> str:
    started = time.monotonic()
    for done in range(1, REPORTS + 1):
        current_job().progress(done / REPORTS, f"file {done}")
        if done % 5 == 0:
            time.sleep(0.001)
    seen["threaded_took"] = time.monotonic() - started
    return "ok"


@job(name="pg.stops_short", status=True, keep_result=60)
async def stops_short() -> None:
    current_job().progress(0.75, "three quarters")


@job(name="pg.untracked", keep_result=60)
async def untracked() -> str:
    current_job().progress(0.5)
    current_job().progress(0.6)
    return "ran"


@job(name="pg.bad", status=True, keep_result=60)
async def bad() -> list[str]:
    caught = []
    for fraction, message in (
        (1.5, None),
        (-0.1, None),
        (float("nan"), None),
        ("0.5", None),
        (True, None),
        (0.5, 42),
    ):
        try:
            current_job().progress(fraction, message)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            caught.append(str(exc))
    current_job().progress(0.5, "x" * 10_000)
    return caught


@job(name="pg.second_try", status=True, retry=1, retry_in=lambda count, exc, job: 0.1)
async def second_try() -> None:
    if current_job().retry_count == 0:
        current_job().progress(0.9, "almost, then it fails")
        raise RuntimeError("first try fails")
    await gates["second_try"].wait()
    current_job().progress(0.2, "second try")


ALL: list[JobFunction[Any, Any]] = [
    halfway,
    rapid,
    threaded,
    stops_short,
    untracked,
    bad,
    second_try,
]


@asynccontextmanager
async def hash_writes(redis: Redis, keys: Keys) -> AsyncIterator[dict[str, int]]:
    """Counts the hash writes to each status key (keyspace notifications: Redis says
    each one, whatever the timing); the key's jid -> its count."""
    before = await redis.config_get("notify-keyspace-events")
    await redis.config_set("notify-keyspace-events", "Kh")
    counts: dict[str, int] = {}
    prefix = f"__keyspace@*__:{keys.status('')}"
    pubsub = redis.pubsub()
    await pubsub.psubscribe(prefix + "*")

    async def listen() -> None:
        async for message in pubsub.listen():
            if message["type"] == "pmessage" and message["data"] in (b"hset", b"hsetnx"):
                jid = message["channel"].decode().rsplit(":", 1)[-1]
                counts[jid] = counts.get(jid, 0) + 1

    listener = asyncio.get_running_loop().create_task(listen())
    try:
        yield counts
    finally:
        # A barrier, not a sleep: notifications come in order, so once this
        # write's is heard, every one before it was counted.
        barrier = keys.status("barrier")
        await redis.hset(barrier, "state", "x")

        async def heard() -> bool:
            return "barrier" in counts

        await wait_for(heard)
        await redis.delete(barrier)
        listener.cancel()
        await pubsub.aclose()
        await redis.config_set("notify-keyspace-events", before.get("notify-keyspace-events", ""))


async def test_progress_is_seen_while_it_runs_in_status_and_the_cli(settings: Settings) -> None:
    gates["halfway"] = anyio.Event()
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        handle = await client.enqueue(halfway)
        assert handle is not None

        async def reported() -> bool:
            found = await client.status(handle.jid)
            return found is not None and found.progress is not None

        await wait_for(reported)
        status = await client.status(handle.jid)
        assert status is not None
        assert status.state == "working"
        assert status["progress"]["fraction"] == 0.4  # as SPEC §3 writes it
        assert status["progress"]["message"] == "resized 40 of 100"
        assert status.progress is not None
        assert status.progress.updated_at is not None
        assert abs(status.progress.updated_at - time.time()) < 60
        assert status["state"] == "working"
        with pytest.raises(KeyError):
            status["nope"]

        shown = await anyio.to_thread.run_sync(lambda: cli(settings, "status", handle.jid))
        assert shown.returncode == 0, shown.stderr
        assert "progress       40% resized 40 of 100 (at " in shown.stdout
        as_json = await anyio.to_thread.run_sync(
            lambda: cli(settings, "status", handle.jid, "--json")
        )
        assert '"fraction": 0.4' in as_json.stdout
        assert '"message": "resized 40 of 100"' in as_json.stdout
        gates["halfway"].set()
        await wait_for(lambda: _state(client, handle.jid, "complete"))
        final = await client.status(handle.jid)
        assert final is not None
        assert final["progress"]["fraction"] == 0.4  # what the handler said, not 1.0


async def _state(client: Client, jid: str, state: str) -> bool:
    found = await client.status(jid)
    return found is not None and found.state == state


@pytest.mark.parametrize(("handler", "took"), [(rapid, "rapid_took"), (threaded, "threaded_took")])
async def test_rapid_reports_are_coalesced_and_the_last_is_kept(
    settings: Settings, redis: Redis, keys: Keys, handler: JobFunction[Any, Any], took: str
) -> None:
    async with (
        hash_writes(redis, keys) as counts,
        Client(settings) as client,
        Worker(settings, jobs=ALL),
    ):
        handle = await client.enqueue(handler)
        assert handle is not None
        assert await handle.result(timeout=30) == "ok"
        await wait_for(lambda: _state(client, handle.jid, "complete"))
    status = await client_status(settings, handle.jid)
    assert status.progress is not None
    assert status.progress.fraction == 1.0  # the last report, kept by the final status
    assert status.progress.message is not None
    assert status.progress.message.endswith(f"{REPORTS}")
    # The client's queued (HSETNX + HSET), working and final writes, and the
    # progress writes: at most PROGRESS_WRITES_PER_S a second of the handler's
    # run, plus the first one (sent at once), never one per report.
    progress_writes = counts.get(handle.jid, 0) - 4
    print(f"{REPORTS} reports in {seen[took]:.3f} s: {progress_writes} progress writes")
    assert progress_writes >= 1, counts  # the first report is written at once
    allowed = seen[took] * PROGRESS_WRITES_PER_S + 2
    assert progress_writes <= allowed, (progress_writes, seen[took])
    assert progress_writes < REPORTS / 10


async def client_status(settings: Settings, jid: str) -> Any:
    async with Client(settings) as client:
        status = await client.status(jid)
    assert status is not None
    return status


async def test_a_job_that_stops_short_keeps_what_it_said(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        handle = await client.enqueue(stops_short)
        assert handle is not None
        await handle.result(timeout=30)
        status = await client.status(handle.jid)
    assert status is not None
    assert status.state == "complete"
    assert status["progress"]["fraction"] == 0.75
    assert status["progress"]["message"] == "three quarters"


async def test_an_untracked_job_reports_nothing_and_warns_once(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(context, "_warned_untracked", set())
    caplog.set_level(logging.WARNING, "cogworker_async.worker")
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        handles = [await client.enqueue(untracked) for _ in range(3)]
        for handle in handles:
            assert handle is not None
            assert await handle.result(timeout=30) == "ran"  # never failed by it
    for handle in handles:
        assert handle is not None
        assert await redis.exists(keys.status(handle.jid)) == 0
    warnings = [r for r in caplog.records if "reports progress but tracks no status" in r.message]
    assert len(warnings) == 1, warnings  # once per job name, not once per call
    assert "pg.untracked" in warnings[0].message
    assert "status=True" in warnings[0].message


async def test_bad_values_are_refused_naming_the_argument(settings: Settings) -> None:
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        handle = await client.enqueue(bad)
        assert handle is not None
        caught = await handle.result(timeout=30)
        status = await client.status(handle.jid)
    assert len(caught) == 6, caught
    assert all("progress(fraction=" in text for text in caught[:5]), caught
    assert "progress(message=...) takes a str or None, not a int" in caught[5]
    assert "from 0 to 1" in caught[0]
    assert status is not None
    assert status.progress is not None
    assert status.progress.message is not None
    assert len(status.progress.message) == PROGRESS_MESSAGE_MAX  # clipped, not refused


async def test_failing_progress_writes_never_fail_the_job_and_are_logged_once(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    job = payload.build("pg.rapid", [], None, "default", now=time.time())
    job["status"] = True
    await redis.set(keys.status(job["jid"]), "not a hash")  # every status write: WRONGTYPE
    await redis.lpush(keys.queue("default"), payload.encode(job))
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        assert await client.result(job["jid"], timeout=30) == "ok"

        async def logged() -> bool:
            return any(r.getMessage().startswith("Status: failing") for r in caplog.records)

        await wait_for(logged)
    failing = [r for r in caplog.records if r.getMessage().startswith("Status: failing")]
    assert len(failing) == 1, [r.getMessage() for r in failing]  # once per episode
    assert await redis.zcard(keys.dead) == 0
    assert await redis.zcard(keys.retry) == 0


async def test_a_retry_starts_with_no_progress(settings: Settings) -> None:
    gates["second_try"] = anyio.Event()
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        handle = await client.enqueue(second_try)
        assert handle is not None

        async def second_try_runs() -> bool:
            found = await client.status(handle.jid)
            # Working after a failure: the first try's error stays, its progress does not.
            return (
                found is not None
                and found.state == "working"
                and found.error_class == "RuntimeError"
            )

        await wait_for(second_try_runs)
        status = await client.status(handle.jid)
        assert status is not None
        assert status.progress is None  # not the first try's 0.9
        gates["second_try"].set()
        await wait_for(lambda: _state(client, handle.jid, "complete"))
        final = await client.status(handle.jid)
    assert final is not None
    assert final["progress"]["fraction"] == 0.2
    assert final["progress"]["message"] == "second try"
