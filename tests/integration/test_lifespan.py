"""A worker's lifespan: opened once per process before the first job, closed after the last."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
import types
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis as sync_redis
from redis.asyncio import Redis

from cogworker_async import (
    Client,
    LifespanError,
    Settings,
    Worker,
    current_job,
    job,
    lifespan_state,
)
from cogworker_async.cli.worker import find_lifespan
from cogworker_async.context import reset_lifespan_state, set_lifespan_state
from cogworker_async.keys import Keys
from tests.conftest import ROOT, child_env
from tests.helpers import wait_for, wait_for_sync
from tests.integration.test_cli import cli
from tests.integration.test_shutdown import enqueue

WORKER = [sys.executable, "-m", "cogworker_async", "worker"]


# --- the real command: `worker tests.lifespan_jobs --processes 2` ---
def events(client: sync_redis.Redis, keys: Keys) -> list[str]:
    return [e.decode() for e in client.lrange(f"{keys.ns}:test:lifespan", 0, -1)]


def uses(client: sync_redis.Redis, keys: Keys) -> dict[str, int]:
    found = client.hgetall(f"{keys.ns}:test:uses")
    return {k.decode(): int(v) for k, v in found.items()}


@pytest.mark.timeout(240)
def test_each_child_opens_its_lifespan_once_and_closes_it_after_its_last_job_on_sigterm(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    with tempfile.NamedTemporaryFile(prefix="cogworker-lifespan-", suffix=".log") as log:
        # No --lifespan: found as the job module's ``worker_lifespan``.
        supervisor = subprocess.Popen(
            [*WORKER, "tests.lifespan_jobs", "--processes", "2", "-c", "5"],
            cwd=ROOT,
            env=child_env(settings),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            # Two fresh interpreters import and start: at load 8 that outlasted 30 s.
            wait_for_sync(lambda: len(events(sync_client, keys)) == 2, timeout=90)
            for i in range(1000):
                enqueue(sync_client, keys, "lifespan.use", jid=f"{i:024x}")
            # Last in the queue, still running when SIGTERM comes (shutdown_timeout is 2 s).
            for i in range(1000, 1004):
                enqueue(sync_client, keys, "lifespan.use", 1.0, jid=f"{i:024x}")
            wait_for_sync(lambda: sum(uses(sync_client, keys).values()) == 1000, timeout=60)
            wait_for_sync(
                lambda: sum(e.startswith("slow:") for e in events(sync_client, keys)) == 4,
                timeout=30,
            )
            supervisor.send_signal(signal.SIGTERM)
            assert supervisor.wait(timeout=settings.shutdown_timeout + 20) == 0
        finally:
            if supervisor.poll() is None:
                supervisor.kill()  # its children see it gone and stop (worker/signals.py)
                supervisor.wait(timeout=30)
        text = Path(log.name).read_text()
    seen = events(sync_client, keys)
    opened = [e.split(":")[1] for e in seen if e.startswith("open:")]
    closed = {e.split(":")[1]: int(e.split(":")[2]) for e in seen if e.startswith("close:")}
    # One open and one close per child, two children, none of them the supervisor.
    assert len(opened) == len(set(opened)) == 2, text
    assert str(supervisor.pid) not in opened
    assert set(closed) == set(opened), text
    # Every job used its process's pool, and each close saw every job of its
    # process, the slow ones still running at SIGTERM included: none came after.
    counted = uses(sync_client, keys)
    assert sum(counted.values()) == 1004
    assert set(counted) <= set(opened)
    assert closed == {pid: counted.get(pid, 0) for pid in opened}
    for pid in opened:
        assert seen.index(f"open:{pid}") < seen.index(f"close:{pid}:{closed[pid]}")
    assert sync_client.zcard(keys.retry) == 0
    assert sync_client.zcard(keys.dead) == 0
    assert sync_client.llen(keys.queue("default")) == 0


def test_a_failing_lifespan_exits_non_zero_before_taking_any_job(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    for i in range(5):
        enqueue(sync_client, keys, "lifespan.use", jid=f"{i:024x}")
    done = cli(
        settings,
        "worker",
        "tests.lifespan_jobs",
        "--lifespan",
        "tests.lifespan_jobs:failing_lifespan",
    )
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: lifespan tests.lifespan_jobs:failing_lifespan failed at start-up: "
        "RuntimeError: database unreachable"
    ]
    logged = [line for line in done.stderr.splitlines() if "failed at start-up" in line]
    assert len(logged) == 2  # the worker's log line and the command's error line
    assert "Traceback" not in done.stderr
    # No job taken: all still queued, nothing in progress, no process left registered.
    assert sync_client.llen(keys.queue("default")) == 5
    assert uses(sync_client, keys) == {}
    assert sync_client.smembers(keys.processes) == set()
    assert list(sync_client.scan_iter(f"{keys.ns}:in_progress:*")) == []


def test_a_lifespan_option_that_names_nothing_is_one_error_line(settings: Settings) -> None:
    done = cli(settings, "worker", "tests.lifespan_jobs", "--lifespan", "tests.lifespan_jobs:nope")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --lifespan 'tests.lifespan_jobs:nope': tests.lifespan_jobs has no callable 'nope'"
    )


# --- in process: Worker(lifespan=...) ---
@dataclass
class State:
    name: str
    log: list[str] = field(default_factory=list)
    release: anyio.Event = field(default_factory=anyio.Event)


class Other:
    pass


@job(name="ls.quick")
async def quick(i: int) -> None:
    state = lifespan_state(State)
    assert current_job().state is state
    state.log.append(f"quick:{i}")


@job(name="ls.sync")
def sync_job() -> None:
    # A plain def, in its thread: the state is reached there too.
    state = lifespan_state(State)
    state.log.append(f"sync:{threading.current_thread() is not threading.main_thread()}")


@job(name="ls.blocking")
async def blocking() -> None:
    state = lifespan_state(State)
    state.log.append("blocking:start")
    await state.release.wait()
    state.log.append("blocking:done")


@job(name="ls.wrong", retry=False)
async def wrong() -> None:
    try:
        lifespan_state(Other)
    except TypeError as exc:
        lifespan_state(State).log.append(f"refused:{exc}")


def lifespan_with(state: State) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(worker: Worker) -> AsyncIterator[State]:
        assert isinstance(worker, Worker)
        state.log.append("open")
        yield state
        state.log.append("close")

    return lifespan


@pytest.mark.anyio
async def test_worker_lifespan_state_reaches_handlers_and_closes_after_the_last_job(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    state = State("db")
    async with Client(settings) as client:
        await client.enqueue_many(quick, [(i,) for i in range(20)])
        await client.enqueue(sync_job)
        await client.enqueue(wrong)
        await client.enqueue(blocking)
    worker = Worker(
        settings, jobs=[quick, sync_job, blocking, wrong], lifespan=lifespan_with(state)
    )
    async with anyio.create_task_group() as group:
        group.start_soon(worker.run)

        async def started_blocking() -> bool:
            return "blocking:start" in state.log

        await wait_for(started_blocking)
        worker.stop()
        assert "close" not in state.log  # the blocking job still runs
        state.release.set()
    log = state.log
    assert log[0] == "open"
    # Closed after the last job, whichever that was: the sync job's thread,
    # started before the blocking one, may finish after it on a busy machine.
    assert log[-1] == "close"
    assert "blocking:done" in log
    assert sorted(e for e in log if e.startswith("quick:")) == sorted(
        f"quick:{i}" for i in range(20)
    )
    assert "sync:True" in log
    assert [e for e in log if e.startswith("refused:")] == [
        f"refused:the lifespan state is a {__name__}.State, not a {__name__}.Other"
    ]
    assert await redis.llen(keys.queue("default")) == 0
    assert await redis.zcard(keys.retry) == 0
    with pytest.raises(RuntimeError, match="no lifespan state here"):
        lifespan_state(State)  # outside the worker's jobs


@pytest.mark.anyio
async def test_worker_run_raises_lifespan_error_and_takes_no_job(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    @contextlib.asynccontextmanager
    async def broken(_worker: Worker) -> AsyncIterator[None]:
        raise ConnectionRefusedError("no database")
        yield

    async with Client(settings) as client:
        await client.enqueue_many(quick, [(i,) for i in range(3)])
    worker = Worker(settings, jobs=[quick], lifespan=broken)
    with pytest.raises(LifespanError, match="broken failed at start-up: ConnectionRefusedError"):
        await worker.run()
    assert await redis.llen(keys.queue("default")) == 3
    assert await redis.scard(keys.processes) == 0


def test_the_typed_accessor_refuses_another_type() -> None:
    token = set_lifespan_state(State("x"))
    try:
        assert lifespan_state(State).name == "x"
        with pytest.raises(TypeError, match=r"is a .*State, not a .*Other"):
            lifespan_state(Other)
    finally:
        reset_lifespan_state(token)
    with pytest.raises(RuntimeError, match="no lifespan state here"):
        lifespan_state(State)


@pytest.mark.anyio
async def test_stop_while_the_lifespan_opens_ends_the_run_without_a_job(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    opening = anyio.Event()
    cleaned = []

    @contextlib.asynccontextmanager
    async def never_ready(_worker: Worker) -> AsyncIterator[None]:
        opening.set()
        try:
            await anyio.Event().wait()  # a database that never answers
        finally:
            cleaned.append(True)
        yield

    async with Client(settings) as client:
        await client.enqueue(quick, 1)
    worker = Worker(settings, jobs=[quick], lifespan=never_ready)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run)
            await opening.wait()
            worker.stop()
    assert cleaned == [True]
    assert await redis.llen(keys.queue("default")) == 1
    assert await redis.scard(keys.processes) == 0


def test_the_command_finds_one_worker_lifespan_among_the_job_modules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second, plain = (types.ModuleType(n) for n in ("ls_first", "ls_second", "ls_plain"))
    first.worker_lifespan = lifespan_with(State("a"))  # type: ignore[attr-defined]
    second.worker_lifespan = lifespan_with(State("b"))  # type: ignore[attr-defined]
    plain.lifespan = lifespan_with(State("c"))  # type: ignore[attr-defined] # FastAPI's name
    for module in (first, second, plain):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    assert find_lifespan(None, ["ls_plain"]) == (None, None)
    assert find_lifespan(None, ["ls_first", "ls_plain"]) == (first.worker_lifespan, None)
    assert find_lifespan(None, ["ls_first", "ls_second"]) == (
        None,
        "worker_lifespan is defined in ls_first, ls_second: choose one with --lifespan",
    )
    # --lifespan wins over the modules' own.
    assert find_lifespan("ls_second:worker_lifespan", ["ls_first"]) == (
        second.worker_lifespan,
        None,
    )
    assert (
        find_lifespan("ls_first", ["ls_first"])[1] == "--lifespan 'ls_first': expected module:attr"
    )
