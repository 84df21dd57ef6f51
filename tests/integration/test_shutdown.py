"""Shutdown and liveness of a real `cogworker-async worker` subprocess."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time

import orjson
import pytest
import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.conftest import spawn_worker_command
from tests.helpers import wait_for_sync


def start_worker(settings: Settings, *extra: str) -> subprocess.Popen[bytes]:
    """A worker subprocess; its log goes to a temp file (a pipe could fill and block it)."""
    with tempfile.NamedTemporaryFile(
        prefix="cogworker-worker-", suffix=".log", delete=False
    ) as log:
        return spawn_worker_command(settings, log, *extra)


def enqueue(client: sync_redis.Redis, keys: Keys, name: str, *args: object, jid: str) -> None:
    job = {
        "jid": jid,
        "class": name,
        "args": list(args),
        "queue": "default",
        "created_at": time.time(),
        "enqueued_at": time.time(),
    }
    client.lpush(keys.queue("default"), orjson.dumps(job))
    client.sadd(keys.queues, "default")


def runs(client: sync_redis.Redis, keys: Keys) -> list[str]:
    return [r.decode() for r in client.lrange(f"{keys.ns}:test:runs", 0, -1)]


def test_sigterm_requeues_long_jobs_and_exits_zero(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    settings = settings.model_copy(update={"shutdown_timeout": 1.0, "concurrency": 5})
    worker = start_worker(settings)
    jids = [f"{i:024x}" for i in range(5)]
    for jid in jids:
        enqueue(sync_client, keys, "t.sleep", 30, jid=jid)
    try:
        wait_for_sync(lambda: len(runs(sync_client, keys)) == 5, timeout=15)
        identity = sync_client.smembers(keys.processes).pop().decode()
        assert sync_client.llen(keys.in_progress(identity)) == 5
        started = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=settings.shutdown_timeout + 15)
        took = time.monotonic() - started
    finally:
        if worker.poll() is None:
            worker.kill()
    assert code == 0
    # Not the jobs' 30 s: the stop's 1 s and its requeue and exit, with room for a
    # machine at load 5+ (it took over 3 s there once).
    assert took <= settings.shutdown_timeout + 8, took
    assert sync_client.llen(keys.queue("default")) == 5  # all requeued
    assert sync_client.exists(keys.in_progress(identity)) == 0
    assert not any(r.endswith(":done") for r in runs(sync_client, keys))  # none ran to the end
    assert sync_client.exists(keys.process(identity)) == 0
    # Requeued jobs are the very same payloads, run once more by the next worker.
    queued = {orjson.loads(j)["jid"] for j in sync_client.lrange(keys.queue("default"), 0, -1)}
    assert queued == set(jids)


def test_sigterm_in_basic_fetch_keeps_every_queued_and_held_job(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    """No in-progress list: the jobs running (cut off by the timeout) and those held
    ahead go back to the queue on SIGTERM, beside those never fetched: 100 of 100."""
    settings = settings.model_copy(
        update={"fetch": "basic", "shutdown_timeout": 1.0, "concurrency": 5, "prefetch": 10}
    )
    jids = [f"{i:024x}" for i in range(100)]
    for jid in jids:
        enqueue(sync_client, keys, "t.sleep", 30, jid=jid)
    worker = start_worker(settings)
    try:
        wait_for_sync(lambda: len(runs(sync_client, keys)) == 5, timeout=30)
        wait_for_sync(lambda: sync_client.llen(keys.queue("default")) <= 85, timeout=10)
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert code == 0
    queued = [orjson.loads(j)["jid"] for j in sync_client.lrange(keys.queue("default"), 0, -1)]
    assert sorted(queued) == jids, f"{len(queued)} of 100 jobs on the queue after SIGTERM"


def test_second_signal_skips_the_wait_but_still_requeues(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    settings = settings.model_copy(update={"shutdown_timeout": 30.0, "concurrency": 2})
    worker = start_worker(settings)
    enqueue(sync_client, keys, "t.sleep", 60, jid="a" * 24)
    try:
        wait_for_sync(lambda: len(runs(sync_client, keys)) == 1, timeout=15)
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        worker.send_signal(signal.SIGINT)
        code = worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert code == 0
    assert sync_client.llen(keys.queue("default")) == 1


def test_finished_jobs_are_not_rerun_after_sigterm(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    worker = start_worker(settings)
    try:
        for i in range(200):
            enqueue(sync_client, keys, "t.record", i, jid=f"{i:024x}")
        wait_for_sync(lambda: len(runs(sync_client, keys)) >= 100, timeout=15)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=10) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    done = runs(sync_client, keys)
    left = {orjson.loads(j)["jid"] for j in sync_client.lrange(keys.queue("default"), 0, -1)}
    assert len(done) == len(set(done))  # nothing ran twice
    assert set(done) | left == {f"{i:024x}" for i in range(200)}  # nothing lost
    assert not set(done) & left  # nothing finished is queued again


@pytest.mark.parametrize("job_name", ["t.sync_sleep", "t.cpu_hog"])
def test_blocking_handler_does_not_stop_the_heartbeat(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys, job_name: str
) -> None:
    """A sync handler in its thread, or an async one hogging the loop, for longer than
    heartbeat_ttl: the presence key never lapses (the beat has its own thread)."""
    worker = start_worker(settings)
    seconds = settings.heartbeat_ttl * 2
    try:
        wait_for_sync(lambda: sync_client.scard(keys.processes) == 1, timeout=15)
        identity = sync_client.smembers(keys.processes).pop().decode()
        enqueue(sync_client, keys, job_name, seconds, jid="b" * 24)
        deadline = time.monotonic() + seconds + 10
        while not runs(sync_client, keys):
            assert sync_client.exists(keys.process(identity)), "presence lapsed while busy"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert runs(sync_client, keys) == ["b" * 24 + ":done"]
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=10) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
