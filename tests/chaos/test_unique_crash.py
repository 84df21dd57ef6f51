"""Unique locks across real SIGKILLs: a requeued job keeps its lock (no duplicate can
slip in) and releases it when it finally succeeds; a job buried as ProcessDied
releases it in the burial's step."""

from __future__ import annotations

import signal
import time

import orjson
import pytest
import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.chaos.test_crashes import identities
from tests.helpers import wait_for_sync
from tests.integration.test_shutdown import runs, start_worker

pytestmark = pytest.mark.chaos


def enqueue_unique(client: sync_redis.Redis, keys: Keys, name: str, *args: object, jid: str) -> str:
    """What Client.enqueue writes for a unique job: the lock (value: jid) and the job."""
    lock = keys.unique(f"{name}:{jid}")
    job = {
        "jid": jid,
        "class": name,
        "args": list(args),
        "queue": "default",
        "created_at": time.time(),
        "enqueued_at": time.time(),
        "unique": {"key": lock, "mode": "until_executed", "for": 600},
    }
    assert client.set(lock, jid, nx=True, ex=600)
    client.lpush(keys.queue("default"), orjson.dumps(job))
    client.sadd(keys.queues, "default")
    return lock


def _stop(*procs: object) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:  # type: ignore[attr-defined]
            proc.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
            try:
                proc.wait(timeout=15)  # type: ignore[attr-defined]
            except Exception:
                proc.kill()  # type: ignore[attr-defined]


def test_killed_mid_job_keeps_the_lock_until_the_rerun_succeeds(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    victim = start_worker(settings)
    survivor = None
    jid = "a" * 24
    try:
        wait_for_sync(lambda: len(identities(sync_client, keys)) == 1, timeout=15)
        lock = enqueue_unique(sync_client, keys, "t.sleep", 1.0, jid=jid)
        wait_for_sync(lambda: f"{jid}:start" in runs(sync_client, keys), timeout=15)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        assert sync_client.get(lock) == jid.encode()  # held while its job is orphaned
        survivor = start_worker(settings)
        wait_for_sync(lambda: f"{jid}:done" in runs(sync_client, keys), timeout=60)
        wait_for_sync(lambda: not sync_client.exists(lock), timeout=15)
        assert runs(sync_client, keys).count(f"{jid}:done") == 1
        assert sync_client.zcard(keys.dead) == 0
    finally:
        _stop(victim, survivor)


def test_process_died_burial_releases_the_lock(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    settings = settings.model_copy(update={"max_orphanings": 1})
    jid = "c" * 24
    lock = enqueue_unique(sync_client, keys, "t.suicide", jid=jid)
    workers: list[object] = []
    try:
        deadline = time.monotonic() + 90
        while sync_client.zcard(keys.dead) == 0:
            assert time.monotonic() < deadline, "poison job never reached dead"
            workers = [w for w in workers if w.poll() is None]  # type: ignore[attr-defined]
            if len(workers) < 2:
                workers.append(start_worker(settings))
            time.sleep(0.1)
        dead = orjson.loads(sync_client.zrange(keys.dead, 0, -1)[0])  # type: ignore[arg-type]
        assert dead["jid"] == jid
        assert dead["error_class"] == "ProcessDied"
        assert not sync_client.exists(lock)
    finally:
        _stop(*workers)
