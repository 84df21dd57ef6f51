"""Real processes, real SIGKILL: orphans come back, poison jobs are stopped."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import orjson
import pytest
import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.conftest import child_env
from tests.helpers import wait_for_sync
from tests.integration.test_shutdown import enqueue, runs, start_worker

pytestmark = pytest.mark.chaos


def identities(client: sync_redis.Redis, keys: Keys) -> set[str]:
    return {m.decode() for m in client.smembers(keys.processes)}


def test_orphans_of_a_killed_worker_are_recovered_by_a_live_one(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    victim = start_worker(settings)
    survivor = None
    try:
        wait_for_sync(lambda: len(identities(sync_client, keys)) == 1, timeout=15)
        victim_id = identities(sync_client, keys).pop()
        jids = [f"{i:024x}" for i in range(3)]
        for jid in jids:
            enqueue(sync_client, keys, "t.sleep", 2.0, jid=jid)
        wait_for_sync(lambda: sync_client.llen(keys.in_progress(victim_id)) == 3, timeout=15)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        killed_at = time.monotonic()
        survivor = start_worker(settings)
        bound = settings.heartbeat_ttl + settings.orphan_threshold + settings.orphan_check_interval
        wait_for_sync(
            lambda: sum(r.endswith(":done") for r in runs(sync_client, keys)) == 3,
            timeout=bound + 15,
        )
        took = time.monotonic() - killed_at
        assert took <= bound + 10, took
        assert sync_client.llen(keys.in_progress(victim_id)) == 0
        done = [r for r in runs(sync_client, keys) if r.endswith(":done")]
        assert sorted(done) == sorted(f"{j}:done" for j in jids)  # each finished once
        assert int(sync_client.get(keys.stat("recovered")) or 0) == 3
        stats = json.loads(
            subprocess.run(
                [sys.executable, "-m", "cogworker_async", "stats", "--json"],
                env=child_env(settings),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert stats["recovery"]["recovered"] == 3
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(timeout=10) == 0
    finally:
        for proc in (victim, survivor):
            if proc is not None and proc.poll() is None:
                proc.kill()


@pytest.mark.timeout(240)  # above the sum of its waits: they fail first, clearly
def test_jobs_recovered_after_one_crash_run_at_full_concurrency(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    """A kill -9 under load (a deploy, an OOM kill): innocent jobs, orphaned once.

    Their first recovery requeues them plainly: they run side by side, not one
    after another (on bc90d0c: one every 3 s), and fresh work is not held up
    behind them.
    """
    duration = 3.0
    victim = start_worker(settings.model_copy(update={"concurrency": 20}))
    survivor = None
    try:
        wait_for_sync(lambda: len(identities(sync_client, keys)) == 1, timeout=15)
        victim_id = identities(sync_client, keys).pop()
        jids = [f"{i:024x}" for i in range(20)]
        for jid in jids:
            enqueue(sync_client, keys, "t.sleep", duration, jid=jid)
        wait_for_sync(lambda: len(runs(sync_client, keys)) == 20, timeout=15)  # all started
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        # Room for fresh work beside the recovered jobs: what is measured is
        # whether it waits behind them, not for a free slot.
        survivor = start_worker(settings.model_copy(update={"concurrency": 30}))
        bound = settings.heartbeat_ttl + settings.orphan_threshold + settings.orphan_check_interval
        wait_for_sync(
            lambda: int(sync_client.get(keys.stat("recovered")) or 0) == 20,
            timeout=bound + 15,
            interval=0.01,
        )
        requeued_at = time.monotonic()
        assert sync_client.llen(keys.in_progress(victim_id)) == 0
        fresh = [f"f{i:023x}" for i in range(10)]
        for jid in fresh:
            enqueue(sync_client, keys, "t.record", 0, jid=jid)
        wait_for_sync(lambda: set(fresh) <= set(runs(sync_client, keys)), timeout=60, interval=0.01)
        fresh_took = time.monotonic() - requeued_at
        wait_for_sync(
            lambda: sum(r.endswith(":done") for r in runs(sync_client, keys)) == 20,
            timeout=90,
            interval=0.01,
        )
        recovered_took = time.monotonic() - requeued_at
        assert recovered_took < 2 * duration, recovered_took  # about one job's duration
        assert fresh_took < duration, fresh_took
        assert sorted(r for r in runs(sync_client, keys) if r.endswith(":done")) == sorted(
            f"{j}:done" for j in jids
        )
        # Orphaned once: counted, not marked (a second orphaning would isolate them).
        assert all(sync_client.get(keys.orphanings(j)) == b"1" for j in jids)
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(timeout=10) == 0
    finally:
        for proc in (victim, survivor):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def test_live_worker_keeps_its_jobs(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    """A busy live worker's jobs are never requeued by another's recovery passes."""
    busy = start_worker(settings)
    watcher = start_worker(settings)
    try:
        wait_for_sync(lambda: len(identities(sync_client, keys)) == 2, timeout=15)
        for i in range(2):
            enqueue(sync_client, keys, "t.sleep", settings.orphan_threshold * 2, jid=f"{i:024x}")
        wait_for_sync(lambda: len(runs(sync_client, keys)) == 2, timeout=15)
        time.sleep(settings.orphan_threshold * 2 + 0.5)  # several recovery passes elapse
        starts = [r for r in runs(sync_client, keys) if r.endswith(":start")]
        assert len(starts) == 2  # nobody ran them a second time
        assert int(sync_client.get(keys.stat("recovered")) or 0) == 0
    finally:
        for proc in (busy, watcher):
            proc.send_signal(signal.SIGTERM)
        for proc in (busy, watcher):
            try:
                proc.wait(timeout=15)
            except Exception:
                proc.kill()


@pytest.mark.parametrize("innocents_before", [0, 8])
def test_a_job_that_kills_its_process_ends_in_dead(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys, innocents_before: int
) -> None:
    """Poison first in line, or fetched in the middle of a batch of innocents."""
    settings = settings.model_copy(update={"max_orphanings": 2})
    for i in range(innocents_before):
        enqueue(sync_client, keys, "t.record", 100 + i, jid=f"{100 + i:024x}")
    enqueue(sync_client, keys, "t.suicide", jid="c" * 24)
    for i in range(20):
        enqueue(sync_client, keys, "t.record", i, jid=f"{i:024x}")
    workers = []
    try:
        deadline = time.monotonic() + 90
        while sync_client.zcard(keys.dead) == 0:
            assert time.monotonic() < deadline, "poison job never reached dead"
            workers = [w for w in workers if w.poll() is None]
            if len(workers) < 2:
                workers.append(start_worker(settings))  # the swarm would replace it
            time.sleep(0.1)
        dead = [orjson.loads(e) for e in sync_client.zrange(keys.dead, 0, -1)]
        assert [d["jid"] for d in dead] == ["c" * 24]  # innocent neighbours never buried
        dead = dead[0]
        assert dead["error_class"] == "ProcessDied"
        starts = [r for r in runs(sync_client, keys) if r == "c" * 24 + ":start"]
        assert len(starts) == settings.max_orphanings + 1
        # Every other job ran (some perhaps twice: they shared a process that died).
        wait_for_sync(
            lambda: (
                len({r for r in runs(sync_client, keys) if ":" not in r}) == 20 + innocents_before
            ),
            timeout=30,
        )
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=15)
            except Exception:
                worker.kill()
