"""The command line as a user runs it: real subprocesses, real Redis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.conftest import child_env

ROOT = Path(__file__).resolve().parents[2]


def cli(settings: Settings, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogworker_async", *args],
        cwd=ROOT,
        env=child_env(settings),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_enqueue_then_stats_json(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    done = cli(settings, "enqueue", "t.record", "1", "--queue", "mail")
    assert done.returncode == 0, done.stderr
    jid = done.stdout.strip()
    assert len(jid) == 24
    job = orjson.loads(sync_client.lindex(keys.queue("mail"), 0))
    assert job["jid"] == jid
    assert job["args"] == [1]
    assert job["class"] == "t.record"
    assert cli(settings, "enqueue", "t.record", "2", "--in", "60").returncode == 0
    stats = cli(settings, "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    data = json.loads(stats.stdout)
    assert data["scheduled"] == 1
    assert {q["name"]: q["size"] for q in data["queues"]} == {"mail": 1}
    assert set(data) >= {"processed", "failed", "retry", "dead", "processes", "queues"}
    assert data["queues"][0]["latency"] >= 0


def test_pause_resume_and_queues(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    assert cli(settings, "enqueue", "t.record", "1").returncode == 0
    assert cli(settings, "pause", "default").returncode == 0
    assert sync_client.sismember(keys.paused, "default")
    listed = json.loads(cli(settings, "queues", "--json").stdout)
    assert listed == [
        {"name": "default", "size": 1, "latency": listed[0]["latency"], "paused": True}
    ]
    assert cli(settings, "resume", "default").returncode == 0
    assert not sync_client.sismember(keys.paused, "default")


def test_user_mistakes_are_one_line_errors(settings: Settings) -> None:
    bad_arg = cli(settings, "enqueue", "t.record", "{oops")
    assert bad_arg.returncode == 2
    assert "argument 0 is not JSON" in bad_arg.stderr
    assert "Traceback" not in bad_arg.stderr

    bad_module = cli(settings, "worker", "no_such_module_here")
    assert bad_module.returncode != 0
    assert "cannot import job module 'no_such_module_here'" in bad_module.stderr
    assert "Traceback" not in bad_module.stderr

    bad_queue = cli(settings, "worker", "tests.jobs_for_tests", "-q", "mail:x")
    assert bad_queue.returncode == 2
    assert "bad queue spec 'mail:x'" in bad_queue.stderr

    unreachable = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    down = cli(unreachable, "stats")
    assert down.returncode == 1
    assert "cannot reach Redis at redis://127.0.0.1:1/0" in down.stderr
    assert "Traceback" not in down.stderr
    worker_down = cli(unreachable, "worker", "tests.jobs_for_tests")
    assert worker_down.returncode == 1
    assert "cannot reach Redis" in worker_down.stderr
    assert "Traceback" not in worker_down.stderr
