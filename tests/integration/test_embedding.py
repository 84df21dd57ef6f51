"""A worker inside someone else's program: their ``asyncio.run(main())``, or an app's
``async with Worker(...)``.

``await worker.run()`` turns SIGTERM/SIGINT into a graceful stop (running jobs
get ``shutdown_timeout``, the rest are requeued, the process deregisters, the
program's own ``finally`` runs). ``async with`` neither waits for Redis nor
touches signals: the app starts while Redis is down and the worker joins in
once Redis is up.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import anyio
import orjson
import pytest
import redis as sync_redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.worker import startup
from cogworker_async.worker import worker as worker_module
from cogworker_async.worker.signals import stop_on_signals
from tests.conftest import ROOT, child_env
from tests.faultproxy import FaultProxy
from tests.helpers import wait_for, wait_for_sync

# --- a user's own main() under signals ----------------------------------------


@pytest.fixture
def log_file() -> Iterator[IO[bytes]]:
    # A file, never a pipe: a pipe nobody reads could fill and block the child.
    with tempfile.NamedTemporaryFile(prefix="cogworker-own-main-", suffix=".log") as log:
        yield log


def own_main(settings: Settings, log: IO[bytes]) -> subprocess.Popen[bytes]:
    """``python -m tests.own_main``: ``asyncio.run(main())`` around ``await worker.run()``."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.own_main"],
        cwd=ROOT,
        env=child_env(settings),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def output(log: IO[bytes]) -> str:
    return Path(log.name).read_text(errors="replace")


def enqueue(client: sync_redis.Redis, keys: Keys, name: str, *args: object, jid: str) -> None:
    job = {"jid": jid, "class": name, "args": list(args), "queue": "default"}
    client.lpush(keys.queue("default"), orjson.dumps(job))
    client.sadd(keys.queues, "default")


def runs(client: sync_redis.Redis, keys: Keys) -> list[str]:
    return [r.decode() for r in client.lrange(f"{keys.ns}:test:runs", 0, -1)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_run_gracefully_inside_the_users_own_main(
    settings: Settings,
    sync_client: sync_redis.Redis,
    keys: Keys,
    log_file: IO[bytes],
    sig: signal.Signals,
) -> None:
    """A short job finishes within shutdown_timeout, a long one is requeued after it,
    the identity leaves the registry and the program's ``finally`` runs, exit 0."""
    settings = settings.model_copy(update={"shutdown_timeout": 4.0, "concurrency": 2})
    child = own_main(settings, log_file)
    short, long = "a" * 24, "b" * 24
    try:
        wait_for_sync(lambda: sync_client.scard(keys.processes) == 1, timeout=15)
        identity = sync_client.smembers(keys.processes).pop().decode()
        enqueue(sync_client, keys, "t.sleep", 1.5, jid=short)
        enqueue(sync_client, keys, "t.sleep", 60, jid=long)
        wait_for_sync(lambda: len(runs(sync_client, keys)) == 2, timeout=15)
        child.send_signal(sig)
        code = child.wait(timeout=settings.shutdown_timeout + 6)
    finally:
        if child.poll() is None:
            child.kill()
    text = output(log_file)
    assert code == 0, text
    assert f"FINALLY {identity}" in text, text
    assert "KeyboardInterrupt" not in text, text
    assert "Traceback" not in text, text
    assert f"{short}:done" in runs(sync_client, keys)  # given its time, not cancelled at once
    queued = [orjson.loads(j)["jid"] for j in sync_client.lrange(keys.queue("default"), 0, -1)]
    assert queued == [long]  # requeued once shutdown_timeout ran out
    assert not sync_client.sismember(keys.processes, identity)
    assert sync_client.exists(keys.process(identity), keys.in_progress(identity)) == 0


def test_a_second_signal_stops_run_faster_and_still_requeues(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys, log_file: IO[bytes]
) -> None:
    settings = settings.model_copy(update={"shutdown_timeout": 60.0, "concurrency": 1})
    child = own_main(settings, log_file)
    try:
        wait_for_sync(lambda: sync_client.scard(keys.processes) == 1, timeout=15)
        enqueue(sync_client, keys, "t.sleep", 60, jid="c" * 24)
        wait_for_sync(lambda: len(runs(sync_client, keys)) == 1, timeout=15)
        child.send_signal(signal.SIGTERM)
        wait_for_sync(lambda: "stopping" in output(log_file), timeout=5)
        started = time.monotonic()
        child.send_signal(signal.SIGINT)
        code = child.wait(timeout=10)
        took = time.monotonic() - started
    finally:
        if child.poll() is None:
            child.kill()
    text = output(log_file)
    assert code == 0, text
    assert took < 5, took
    assert "FINALLY" in text, text
    assert "Traceback" not in text, text
    assert sync_client.llen(keys.queue("default")) == 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_sigterm_while_run_waits_for_redis_stops_at_once(
    settings: Settings, log_file: IO[bytes]
) -> None:
    down = settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"})
    child = own_main(down, log_file)
    try:
        wait_for_sync(lambda: "Redis unavailable" in output(log_file), timeout=15)
        started = time.monotonic()
        child.send_signal(signal.SIGTERM)
        code = child.wait(timeout=10)
        took = time.monotonic() - started
    finally:
        if child.poll() is None:
            child.kill()
    text = output(log_file)
    assert code == 0, text
    assert took < 2, took
    assert "FINALLY" in text, text
    assert "Traceback" not in text, text


# --- an app's async with, with Redis down at start ------------------------------

ran: list[int] = []


@job(name="embed.note")
async def note(i: int) -> None:
    ran.append(i)


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Each start-up attempt to reach Redis (its time), counted."""
    seen: list[float] = []
    real = startup.server_version

    async def counted(redis: object) -> tuple[int, ...]:
        seen.append(time.monotonic())
        return await real(redis)  # type: ignore[arg-type]

    monkeypatch.setattr(startup, "server_version", counted)
    return seen


@pytest.mark.anyio
async def test_async_with_starts_without_redis_and_runs_once_redis_is_up(
    settings: Settings, attempts: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cogworker_async")
    ran.clear()
    port = free_port()
    down = settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{port}/0"})
    worker = Worker(down, jobs=[note])
    server = EmbeddedRedis(port=port)
    try:
        # On bc90d0c entering waited for Redis (forever here): fail instead of hanging.
        with anyio.fail_after(20):
            began = time.monotonic()
            async with worker:
                assert time.monotonic() - began < 1.0  # the app's start-up goes on
                assert not worker.started.is_set()
                await wait_for(lambda: _at_least(attempts, 3))  # it keeps trying
                unavailable = [r for r in caplog.records if "Redis unavailable" in r.message]
                assert len(unavailable) == 1  # once per outage, not once per attempt
                await anyio.to_thread.run_sync(server.start)
                with anyio.fail_after(5):
                    await worker.started.wait()
                async with Client(down) as client:
                    await client.enqueue_many(note, [(i,) for i in range(5)])
                await wait_for(lambda: _at_least(ran, 5))
    finally:
        server.stop()
    assert sorted(ran) == list(range(5))


@pytest.mark.anyio
async def test_leaving_async_with_while_redis_is_down_is_prompt(
    settings: Settings, attempts: list[float]
) -> None:
    down = settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"})
    with anyio.fail_after(20):
        async with Worker(down, jobs=[note]) as worker:
            await wait_for(lambda: _at_least(attempts, 2))
            left = time.monotonic()
        assert time.monotonic() - left < 2.0
    assert not worker.started.is_set()


@pytest.fixture
def proxy(redis_server: EmbeddedRedis) -> Iterator[FaultProxy]:
    assert redis_server.port is not None
    with FaultProxy("127.0.0.1", redis_server.port) as proxy:
        yield proxy


@pytest.mark.anyio
async def test_a_stalled_redis_holds_neither_the_apps_start_nor_its_stop(
    settings: Settings, proxy: FaultProxy
) -> None:
    """A link that neither refuses nor answers (socket_timeout 5 s): entering goes on
    after ENTER_WAIT, leaving is prompt even with a start-up call stuck on it."""
    stalled = settings.model_copy(update={"redis_url": proxy.url})
    proxy.stall()
    with anyio.fail_after(20):
        began = time.monotonic()
        async with Worker(stalled, jobs=[note]) as worker:
            assert time.monotonic() - began < worker_module.ENTER_WAIT + 1.0
            assert not worker.started.is_set()
            left = time.monotonic()
        assert time.monotonic() - left < 1.0


@pytest.mark.anyio
async def test_a_worker_entered_during_a_stall_runs_jobs_once_the_link_heals(
    settings: Settings, proxy: FaultProxy
) -> None:
    ran.clear()
    stalled = settings.model_copy(update={"redis_url": proxy.url})
    proxy.stall()
    with anyio.fail_after(30):
        began = time.monotonic()
        async with Worker(stalled, jobs=[note]) as worker:
            assert time.monotonic() - began < worker_module.ENTER_WAIT + 1.0
            proxy.heal()
            await worker.started.wait()
            async with Client(settings) as client:
                await client.enqueue_many(note, [(i,) for i in range(3)])
            await wait_for(lambda: _at_least(ran, 3))
    assert sorted(ran) == [0, 1, 2]


async def _at_least(items: list[object] | list[float] | list[int], n: int) -> bool:
    return len(items) >= n


# --- the handlers themselves ----------------------------------------------------


@pytest.mark.anyio
async def test_signal_handlers_call_stop_and_put_back_what_was_there() -> None:
    """In the main thread's loop: SIGTERM/SIGINT call stop while the block runs; after it,
    an earlier loop handler and an earlier signal.signal handler are back."""
    loop = asyncio.get_running_loop()
    theirs: list[str] = []
    stops: list[int] = []
    loop.add_signal_handler(signal.SIGTERM, theirs.append, "loop SIGTERM")
    before_int = signal.signal(signal.SIGINT, lambda *_: theirs.append("python SIGINT"))
    try:
        with stop_on_signals(lambda: stops.append(1), logging.getLogger("test")) as installed:
            assert installed
            os.kill(os.getpid(), signal.SIGTERM)
            await wait_for(lambda: _at_least(stops, 1))
            os.kill(os.getpid(), signal.SIGINT)
            await wait_for(lambda: _at_least(stops, 2))
        assert theirs == []
        os.kill(os.getpid(), signal.SIGTERM)
        await wait_for(lambda: _at_least(theirs, 1))
        os.kill(os.getpid(), signal.SIGINT)
        await wait_for(lambda: _at_least(theirs, 2))
        assert theirs == ["loop SIGTERM", "python SIGINT"]
        assert len(stops) == 2
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGINT, before_int)


def test_no_handlers_outside_the_main_thread() -> None:
    result: list[bool] = []

    async def inside() -> None:
        with stop_on_signals(lambda: None, logging.getLogger("test")) as installed:
            result.append(installed)

    thread = threading.Thread(target=lambda: asyncio.run(inside()))
    thread.start()
    thread.join(timeout=10)
    assert result == [False]
