"""after=[...] under kill -9: the worker running a prerequisite is SIGKILLed mid-run;
orphan recovery runs the prerequisite again on another worker, and the jobs
waiting on it are released by that run's ack, each run exactly once (a job
waiting on two prerequisites too, one of them killed mid-run)."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings
from cogworker_async.keys import Keys
from tests.after_jobs import first_run_hangs, note, runs_key
from tests.conftest import ROOT, child_env
from tests.helpers import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.anyio]


def start(settings: Settings) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "cogworker_async", "worker", "tests.after_jobs"]
    with tempfile.NamedTemporaryFile(prefix="cogworker-after-", suffix=".log", delete=False) as log:
        return subprocess.Popen(
            args, cwd=ROOT, env=child_env(settings), stdout=log, stderr=subprocess.STDOUT
        )


async def runs(redis: Redis, keys: Keys, jid: str) -> int:
    return int(await redis.hget(runs_key(keys.ns), jid) or 0)  # type: ignore[misc]


@pytest.mark.timeout(120)
async def test_kill_9_of_a_prerequisites_worker_releases_its_dependents_once(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    procs = [start(settings)]
    try:
        async with Client(settings) as client:
            # Tracked: it may have ended before `both` names it (judged by its status).
            other = await client.enqueue(note.options(status=True))
            pre = await client.enqueue(first_run_hangs)
            assert other is not None
            assert pre is not None
            deps = [await client.enqueue(note.options(after=[pre])) for _ in range(3)]
            both = await client.enqueue(note.options(after=[pre, other]))

            async def started() -> bool:
                return await runs(redis, keys, pre) == 1

            await wait_for(started, timeout=30)
            assert [await runs(redis, keys, str(d)) for d in deps] == [0, 0, 0]
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(timeout=10)
            procs.append(start(settings))

            async def released() -> bool:
                return all([await runs(redis, keys, str(d)) >= 1 for d in [*deps, both]])

            # Recovery takes about orphan_threshold and a check, then the rerun.
            await wait_for(released, timeout=60, interval=0.2)
            await anyio.sleep(1.0)  # a second release would have run by now
            assert await runs(redis, keys, pre) == 2
            assert [await runs(redis, keys, str(d)) for d in [*deps, both]] == [1, 1, 1, 1]
            assert not await redis.exists(keys.after_waiting, keys.after_left)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
