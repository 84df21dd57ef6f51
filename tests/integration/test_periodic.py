"""Periodic entries across real worker processes: each slot enqueued exactly once,
misfire policies after a restart, a changed definition replacing the old one."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.conftest import ROOT, child_env
from tests.helpers import stop_processes as stop
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio


ENTRIES_WORKER = (
    "tests.periodic_entries",
    "--periodic",
    "tests.periodic_entries:ENTRIES",
    "-c",
    "2",
)


def spawn(
    settings: Settings, log_path: Path, *worker_args: str, **env: str
) -> subprocess.Popen[bytes]:
    """``cogworker-async worker`` with ``worker_args`` (default: the test entries)."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "cogworker_async", "worker", *(worker_args or ENTRIES_WORKER)],
            cwd=ROOT,
            env=child_env(settings, **env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def redis_now(redis: Redis) -> float:
    seconds, micros = await redis.time()
    return int(seconds) + int(micros) / 1e6


async def runs(redis: Redis, settings: Settings) -> dict[str, int]:
    raw = await redis.hgetall(f"{settings.namespace}:test:periodic_runs")  # type: ignore[misc]
    return {k.decode(): int(v) for k, v in raw.items()}


def slots_of(found: dict[str, int], label: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for field, count in found.items():
        lab, _, slot = field.partition(":")
        if lab == label:
            out[int(slot)] = count
    return out


async def test_ten_processes_enqueue_each_slot_exactly_once(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    procs: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    for _ in range(10):
        procs.append(spawn(settings, tmp_path / "workers.log"))

    async def all_up() -> bool:
        return int(await redis.scard(keys.processes)) >= 10  # type: ignore[misc]

    await wait_for(all_up, timeout=60)
    # Every process ticks from its start: the window begins after the last one is up.
    first = math.ceil(await redis_now(redis)) + 1
    last = first + 5  # six slots, each claimed by ten processes at once

    async def window_done() -> bool:
        done = slots_of(await runs(redis, settings), "1")
        return any(slot >= last + 1 for slot in done)

    await wait_for(window_done, timeout=40)
    stop(procs)
    counted = slots_of(await runs(redis, settings), "1")
    window = {slot: counted.get(slot, 0) for slot in range(first, last + 1)}
    assert window == dict.fromkeys(range(first, last + 1), 1), (
        tmp_path / "workers.log"
    ).read_text()[-3000:]
    # No slot anywhere ran twice, and the last slot run is persisted.
    assert set(counted.values()) == {1}
    assert float(await redis.hget(keys.periodic("last"), "tick")) >= last  # type: ignore[misc, arg-type]
    # Each slot's claim outlives the time it can be claimed on time (2 s for an
    # every-second entry) by a minute, never deleted with its job (arq #196); and
    # no longer than that: the claim keys per entry stay a constant few.
    for slot in range(first, last + 1):
        ttl = await redis.pttl(keys.periodic_claim("tick", str(slot)))
        assert 0 < ttl <= 62_000, (slot, ttl)


async def _run_stop_restart(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    procs: list[subprocess.Popen[bytes]],
    tmp_path: Path,
    misfire: str,
) -> tuple[int, float, dict[int, int]]:
    """Run one worker until a slot runs, stop it for ~5 slots, start it again until
    two more slots ran. Returns (last slot before the stop, the new process's start
    on Redis's clock as it published it, the run counts per slot)."""
    log = tmp_path / "worker.log"
    procs.append(spawn(settings, log, TEST_PERIODIC_MISFIRE=misfire))

    async def ran() -> bool:
        return bool(slots_of(await runs(redis, settings), "1"))

    await wait_for(ran, timeout=30)
    stop(procs)
    before = max(slots_of(await runs(redis, settings), "1"))
    stopped = await redis_now(redis)
    # The downtime itself is what is tested: nothing to await but time (5 slots).
    await anyio.sleep(5)
    procs.append(spawn(settings, log, TEST_PERIODIC_MISFIRE=misfire))

    async def published() -> float:
        raw = await redis.hget(keys.periodic("entries"), "tick")  # type: ignore[misc]
        return float(orjson.loads(raw)["published_at"])

    async def restarted() -> bool:
        return await published() > stopped

    await wait_for(restarted, timeout=30)
    start = await published()

    async def two_after() -> bool:
        done = slots_of(await runs(redis, settings), "1")
        return len([s for s in done if s > start]) >= 2

    await wait_for(two_after, timeout=30)
    stop(procs)
    assert start - before >= 5
    return before, start, slots_of(await runs(redis, settings), "1")


async def test_restart_after_downtime_with_skip_runs_no_missed_slot(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    procs: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    before, start, counted = await _run_stop_restart(settings, redis, keys, procs, tmp_path, "skip")
    assert [s for s in counted if before < s <= start] == []
    # From the restart on, every slot runs once.
    after = sorted(s for s in counted if s > start)
    assert after == list(range(after[0], after[-1] + 1))
    assert set(counted.values()) == {1}


async def test_restart_after_downtime_with_run_once_runs_the_latest_missed_slot_once(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    procs: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    before, start, counted = await _run_stop_restart(
        settings, redis, keys, procs, tmp_path, "run_once"
    )
    # Of the ~5 slots missed while no worker ran, only the latest one, once.
    assert {s: c for s, c in counted.items() if before < s <= start} == {math.floor(start): 1}
    assert set(counted.values()) == {1}


async def test_changing_an_entry_replaces_its_schedule(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    procs: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    procs.append(spawn(settings, log))

    async def ran_every_1() -> bool:
        return len(slots_of(await runs(redis, settings), "1")) >= 2

    await wait_for(ran_every_1, timeout=30)
    stop(procs)
    old = orjson.loads(await redis.hget(keys.periodic("entries"), "tick"))  # type: ignore[misc, arg-type]
    restart = await redis_now(redis)
    procs.append(spawn(settings, log, TEST_PERIODIC_EVERY="2"))

    async def ran_every_2() -> bool:
        return len(slots_of(await runs(redis, settings), "2")) >= 2

    await wait_for(ran_every_2, timeout=30)
    stop(procs)
    new = orjson.loads(await redis.hget(keys.periodic("entries"), "tick"))  # type: ignore[misc, arg-type]
    assert (old["every"], new["every"]) == (1.0, 2.0)
    assert old["hash"] != new["hash"]
    counted = await runs(redis, settings)
    # After the restart only the new definition fires, on its own (even) slots.
    assert not [s for s in slots_of(counted, "1") if s > restart + 1]
    assert all(s % 2 == 0 for s in slots_of(counted, "2"))


def cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogworker_async", *args],
        cwd=ROOT,
        env=child_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_periodic_list_and_run_now_from_the_cli(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    procs: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    procs.append(spawn(settings, tmp_path / "worker.log"))

    async def ran() -> bool:
        return bool(slots_of(await runs(redis, settings), "1"))

    await wait_for(ran, timeout=30)
    stop(procs)
    listed = cli(settings, "periodic", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = orjson.loads(listed.stdout)
    last = max(slots_of(await runs(redis, settings), "1"))
    assert (entry["name"], entry["schedule"], entry["tz"]) == ("tick", "every 1s", "UTC")
    assert entry["last_run"] == last
    assert entry["next_run"] > await redis_now(redis) - 1
    # The last run's result, recorded by the worker that ran it.
    assert entry["last_result"]["result"] == "ok"
    assert entry["last_result"]["slot"] <= last
    assert (entry["overlap"], entry["running"]) == (True, None)
    plain = cli(settings, "periodic", "list")
    assert "result ok" in plain.stdout

    done = cli(settings, "periodic", "run-now", "tick")
    assert done.returncode == 0, done.stderr
    jid = done.stdout.strip()
    queued = [orjson.loads(raw) for raw in await redis.lrange(keys.queue("default"), 0, -1)]  # type: ignore[misc]
    assert [
        (j["jid"], j["class"], j["args"], j["periodic_pjid"]) for j in queued if j["jid"] == jid
    ] == [(jid, "periodic.record", ["1"], "tick")]
    unknown = cli(settings, "periodic", "run-now", "nope")
    assert unknown.returncode == 1
    assert "no periodic entry named 'nope'" in unknown.stderr + unknown.stdout

    # An unreadable published definition is named, beside the readable ones, and
    # never a traceback; it stays in Redis for a human.
    await redis.hset(keys.periodic("entries"), "broken", "{not json")
    await redis.hset(keys.periodic("last"), "broken", "garbage")
    listed = cli(settings, "periodic", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    by_name = {e["name"]: e for e in orjson.loads(listed.stdout)}
    assert by_name["tick"]["schedule"] == "every 1s"
    assert by_name["broken"]["schedule"].startswith("unreadable definition (not JSON")
    assert "'broken': its published definition is unreadable" in listed.stderr
    refused = cli(settings, "periodic", "run-now", "broken")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: periodic entry 'broken' has an unreadable definition")
    assert "Traceback" not in refused.stderr
    assert await redis.hget(keys.periodic("entries"), "broken") == b"{not json"


async def test_overlap_false_skips_slots_while_the_previous_run_runs(
    settings: Settings,
    redis: Redis,
    keys: Keys,
    procs: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    log = tmp_path / "workers.log"
    env = {"TEST_PERIODIC_OVERLAP": "0", "TEST_PERIODIC_SLEEP": "2.5"}
    for _ in range(3):
        procs.append(spawn(settings, log, **env))

    async def three_runs() -> bool:
        return len(slots_of(await runs(redis, settings), "1")) >= 3

    await wait_for(three_runs, timeout=40)
    stop(procs)
    peaks = [
        int(p) for p in await redis.lrange(f"{settings.namespace}:test:periodic_runs:peaks", 0, -1)
    ]  # type: ignore[misc]
    assert peaks
    assert max(peaks) == 1  # never two runs at once
    ran = sorted(slots_of(await runs(redis, settings), "1"))
    # A run takes 2.5 s of 1 s slots: the slots while it runs are skipped.
    assert all(b - a >= 2 for a, b in itertools.pairwise(ran))
    text = log.read_text()
    assert "skipped: the previous run" in text
    # Each skipped slot is logged once (by the one process whose claim decided it).
    skipped = [
        line.split("slot ")[1].split(" ")[0]
        for line in text.splitlines()
        if "skipped: the previous run" in line
    ]
    assert len(skipped) == len(set(skipped))
    # Three runs at all: each success released the lock (its TTL is an hour).
    assert len(ran) >= 3
