"""``@periodic``: a job module alone, named to the CLI worker, brings its periodic
entry along; a six-field cron expression fires every second; across two
processes each slot runs once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.helpers import wait_for
from tests.integration.test_cli import cli
from tests.integration.test_periodic import redis_now, spawn, stop

pytestmark = pytest.mark.anyio


async def test_a_decorated_job_module_ticks_its_entry_once_a_slot(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    procs: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    worker = ("tests.periodic_decorated",)
    procs.extend(spawn(settings, tmp_path / "workers.log", *worker) for _ in range(2))

    async def both_up() -> bool:
        return int(await redis.scard(keys.processes)) >= 2  # type: ignore[misc]

    await wait_for(both_up, timeout=60)
    first = int(await redis_now(redis)) + 1

    async def slots() -> dict[int, int]:
        raw = await redis.hgetall(f"{settings.namespace}:test:decorated")  # type: ignore[misc]
        return {int(k): int(v) for k, v in raw.items()}

    async def four_seconds_ran() -> bool:
        return sum(1 for slot in await slots() if slot >= first) >= 4

    await wait_for(four_seconds_ran, timeout=30)
    stop(procs)
    ran = {slot: count for slot, count in (await slots()).items() if slot >= first}
    # Four or more seconds' slots within the wait: sub-minute, from the seconds field.
    assert set(ran.values()) == {1}, ran  # each slot once, across both processes
    listed = cli(settings, "periodic", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = orjson.loads(listed.stdout)
    assert (entry["name"], entry["job"], entry["schedule"]) == (
        "every-second",
        "periodic.decorated",
        "* * * * * *",
    )
