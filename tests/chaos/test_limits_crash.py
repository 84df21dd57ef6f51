"""Concurrency limits across real processes and a kill -9 (issue 23 §5, §6).

A Redis restart (killed, started again from its AOF) under limited load
leaks no slot either and never lets more than the limit run.

Two workers run the jobs of two keys (limits 2 and 3) and of a window
limit (3 starts in any 2 s); one is killed with
SIGKILL while it runs some. Recovery releases the dead process's slots with
the requeue (the same step), which lets held jobs in; a third worker finishes
everything. Then: no slot leaked, nothing left held, and the ledger of starts
and ends (a killed run ends at the kill) never shows a key over its limit,
nor the window more starts than its rate.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import anyio
import orjson
import pytest
import redis as sync_redis
from redis.asyncio import Redis

from cogworker_async import Client, Worker, job, limits
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.chaos.test_fair_dispatch import identities, ledger, start_worker
from tests.conftest import FAST
from tests.helpers import stop_processes, wait_for, wait_for_sync

pytestmark = pytest.mark.chaos

LIMITS = {"a": 2, "b": 3}  # concurrency limits
WINDOW = ("w", 3, 2.0)  # a window limit: at most 3 starts in any 2 s
SECONDS = 1.5
# A soak (issue 23): rounds of the kill test for this many seconds (0: one round).
SOAK_S = float(os.environ.get("COGWORKER_LIMITS_SOAK_S", "0"))


def enqueue_limited(client: sync_redis.Redis, keys: Keys, jobs: dict[str, str]) -> None:
    """Each jid's ``ledger.sleep`` job with a concurrency limit on its key, as
    ``@job(limits=[limits.concurrency(key, n)])`` writes it, all in one LPUSH."""
    now = time.time()
    payloads = [
        orjson.dumps(
            {
                "jid": jid,
                "class": "ledger.sleep",
                "args": [SECONDS],
                "queue": "default",
                "created_at": now,
                "enqueued_at": now,
                **_limit_fields(key),
            }
        )
        for jid, key in jobs.items()
    ]
    client.set(keys.limits_used, 1)  # as a client does before its first limited job
    client.lpush(keys.queue("default"), *payloads)
    client.sadd(keys.queues, "default")


def _limit_fields(key: str) -> dict[str, Any]:
    if key == WINDOW[0]:
        return {"limits": [["window", *WINDOW]]}
    return {"limits": [["concurrency", key, LIMITS[key]]], "limit_slots": [key]}


def most_at_once(runs: list[tuple[float, float]]) -> int:
    """The most intervals (start, end) open at one instant (an end before a start
    at the same instant: a slot freed is taken again, not doubled)."""
    edges = sorted([(start, 1) for start, _ in runs] + [(end, -1) for _, end in runs])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def runs_by_key(
    entries: list[dict[str, Any]], jobs: dict[str, str], killed_pid: int, killed_at: float
) -> dict[str, list[tuple[float, float]]]:
    """Each run's (start, end) per key; a run of the killed process that never
    ended ended at the kill."""
    ends = {(e["jid"], e["pid"]): e["at"] for e in entries if e["event"] == "end"}
    runs: dict[str, list[tuple[float, float]]] = {key: [] for key in (*LIMITS, WINDOW[0])}
    for e in entries:
        if e["event"] != "start":
            continue
        end = ends.get((e["jid"], e["pid"]))
        if end is None:
            assert e["pid"] == killed_pid, e  # only the killed process left runs open
            end = killed_at
        runs[jobs[e["jid"]]].append((e["at"], end))
    return runs


def test_a_killed_worker_leaks_no_slot_and_no_key_runs_over_its_limit(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    """One round (make test); with ``COGWORKER_LIMITS_SOAK_S`` set, rounds one
    after another on the same workers until that many seconds have passed (a
    soak: each round kills one worker with SIGKILL and starts a new one)."""
    settings = settings.model_copy(update={"concurrency": 6})
    procs: list[subprocess.Popen[bytes]] = []
    try:
        live = [start_worker(settings)[0], start_worker(settings)[0]]
        procs.extend(live)
        wait_for_sync(lambda: len(identities(sync_client, keys)) == 2, timeout=30)
        began = time.monotonic()
        totals: dict[str, Any] = {"rounds": 0, "jobs": 0, "held_at_kill": 0}
        most: dict[str, int] = dict.fromkeys(LIMITS, 0)
        while True:
            held, peaks = _one_round(settings, sync_client, keys, live, procs, totals["rounds"])
            totals["rounds"] += 1
            totals["jobs"] += 24
            totals["held_at_kill"] = max(totals["held_at_kill"], held)
            most = {key: max(most[key], peaks[key]) for key in LIMITS}
            if time.monotonic() - began >= SOAK_S:
                break
        print(
            f"\nlimits chaos: {totals['rounds']} round(s), {totals['jobs']} jobs, "
            f"{totals['rounds']} SIGKILL(s) in {time.monotonic() - began:.0f} s; most held at a "
            f"kill {totals['held_at_kill']}; most running at once {most} (limits {LIMITS}); "
            "0 slots leaked, 0 held left, 0 retried"
        )
    finally:
        stop_processes(procs)


def _one_round(
    settings: Settings,
    sync_client: sync_redis.Redis,
    keys: Keys,
    live: list[subprocess.Popen[bytes]],
    procs: list[subprocess.Popen[bytes]],
    index: int,
) -> tuple[int, dict[str, int]]:
    """24 limited jobs, one of ``live`` killed while it runs one of them and a new
    worker started in its place, then every check; the jobs held at the kill and
    the most running at once per key."""
    jobs = {f"{index:08x}{i:016x}": ("a", "b", "w")[i % 3] for i in range(24)}
    enqueue_limited(sync_client, keys, jobs)

    def started_by() -> set[int]:
        entries = ledger(sync_client, keys)
        return {e["pid"] for e in entries if e["event"] == "start" and e["jid"] in jobs}

    wait_for_sync(lambda: bool(started_by() & {p.pid for p in live}), timeout=30)
    victim = next(p for p in live if p.pid in started_by())
    held = sum(sync_client.llen(keys.limit_parked(key)) for key in (*LIMITS, WINDOW[0]))
    assert held > 0  # more jobs than slots: the rest wait held, not retried
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    killed_at = time.time()
    live.remove(victim)
    live.append(start_worker(settings)[0])
    procs.append(live[-1])

    def all_ended() -> bool:
        entries = ledger(sync_client, keys)
        ended = {e["jid"] for e in entries if e["event"] == "end" and e["jid"] in jobs}
        return ended == set(jobs)

    wait_for_sync(all_ended, timeout=120)
    # 0 slots leaked, nothing left held, none failed or retried for its limit.
    wait_for_sync(
        lambda: all(not sync_client.scard(keys.limit_slots(key)) for key in LIMITS),
        timeout=20,
    )
    for key in (*LIMITS, WINDOW[0]):
        assert sync_client.llen(keys.limit_parked(key)) == 0
    assert sync_client.zcard(keys.retry) == 0
    assert sync_client.zcard(keys.dead) == 0
    entries = [e for e in ledger(sync_client, keys) if e["jid"] in jobs]
    runs = runs_by_key(entries, jobs, victim.pid, killed_at)
    for key, limit in LIMITS.items():
        assert most_at_once(runs[key]) <= limit, (key, runs[key])
    # The window: no 3 + 1 starts within 2 s (0.5 s of slack: a start is
    # logged as its handler begins, a little after its admission).
    name, n, per = WINDOW
    window_starts = sorted(start for start, _ in runs[name])
    for i in range(len(window_starts) - n):
        assert window_starts[i + n] - window_starts[i] > per - 0.5, window_starts
    return held, {key: most_at_once(runs[key]) for key in LIMITS}


def test_most_at_once_counts_overlaps() -> None:
    assert most_at_once([(0, 2), (1, 3), (2, 4)]) == 2
    assert most_at_once([(0, 5), (1, 2), (1.5, 3)]) == 3


@pytest.fixture
def durable_redis() -> Iterator[EmbeddedRedis]:
    """A server that keeps its data across a restart (AOF, fsync always)."""
    server = EmbeddedRedis(extra_args=["--appendonly", "yes", "--appendfsync", "always"])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def durable_settings(durable_redis: EmbeddedRedis, namespace: str) -> Settings:
    return Settings(redis_url=durable_redis.url, namespace=namespace, concurrency=20, **FAST)


in_flight: list[int] = [0, 0]  # running now, the most at once
finished: list[str] = []


@job(name="chaos.limited", limits=[limits.concurrency("three", 3)])
async def limited_step(tag: str) -> None:
    in_flight[0] += 1
    in_flight[1] = max(in_flight[1], in_flight[0])
    try:
        await asyncio.sleep(0.05)
    finally:
        in_flight[0] -= 1
    finished.append(tag)


@pytest.mark.anyio
@pytest.mark.timeout(180)
async def test_a_redis_restart_leaks_no_slot_and_never_over_admits(
    durable_redis: EmbeddedRedis, durable_settings: Settings, keys: Keys
) -> None:
    """Redis killed under limited load and started again from its AOF: every job
    runs, never more than 3 at once, and no slot or held job is left behind."""
    in_flight[:] = [0, 0]
    finished.clear()
    total = 150
    async with Client(durable_settings) as client:
        await client.enqueue_many(limited_step, [(f"t{i}",) for i in range(total)])
        async with Worker(durable_settings, jobs=[limited_step]):
            await wait_for(lambda: _finished(20), timeout=30)
            durable_redis.kill()
            await anyio.sleep(3)
            durable_redis.restart()
            await wait_for(lambda: _all_finished(total), timeout=90)
            check = Redis.from_url(durable_redis.url)
            try:
                await wait_for(lambda: _nothing_left(check, keys), timeout=30)
            finally:
                await check.aclose()
    assert in_flight[1] <= 3


async def _finished(n: int) -> bool:
    return len(finished) >= n


async def _all_finished(total: int) -> bool:
    return len(set(finished)) >= total


async def _nothing_left(redis: Redis, keys: Keys) -> bool:
    return not await redis.scard(keys.limit_slots("three")) and not await redis.llen(
        keys.limit_parked("three")
    )
