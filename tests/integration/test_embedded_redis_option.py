"""``worker --embedded-redis`` listens where the settings point, and says so on stdout.

Issue 25: it listened on a random port printed only on stderr while clients
default to localhost:6379, so with another Redis there jobs silently went to
the wrong server. Real subprocesses and real redis-servers (never the shared
6379: every test names its port with --redis-url).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis as sync_redis

from cogworker_async import payload
from cogworker_async.cli.embedded_redis import EmbeddedRedisRefused, embedded_address
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.conftest import ROOT, child_env
from tests.helpers import stop_processes, wait_for_sync
from tests.servers import free_port


def _worker(settings: Settings, out: Path, err: Path, *args: str) -> subprocess.Popen[bytes]:
    with out.open("wb") as stdout, err.open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "cogworker_async", "worker", "tests.jobs_for_tests", *args],
            cwd=ROOT,
            env=child_env(settings),
            stdout=stdout,
            stderr=stderr,
        )


def test_it_listens_at_the_url_given_and_prints_it_on_stdout(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    out, err = tmp_path / "out", tmp_path / "err"
    worker = _worker(settings, out, err, "--embedded-redis", "--redis-url", url)
    try:
        wait_for_sync(lambda: out.read_text() != "", timeout=60)
        assert out.read_text() == f"COGWORKER_REDIS_URL={url}\n"
        client = sync_redis.Redis.from_url(url)
        keys = Keys(settings.namespace)
        job = payload.build("t.record", [1], {}, "default", now=time.time())
        client.lpush(keys.queue("default"), payload.encode_job(job))
        client.sadd(keys.queues, "default")
        wait_for_sync(lambda: int(client.get(keys.stats_processed) or 0) == 1, timeout=60)
        client.close()
        stop_processes([worker])
        assert worker.returncode == 0, err.read_text()
    finally:
        stop_processes([worker])


def test_a_taken_port_fails_naming_the_option(settings: Settings, tmp_path: Path) -> None:
    other = EmbeddedRedis(port=free_port())  # "another Redis" already at that address
    other.start()
    try:
        url = f"redis://127.0.0.1:{other.port}/0"
        out, err = tmp_path / "out", tmp_path / "err"
        worker = _worker(settings, out, err, "--embedded-redis", "--redis-url", url)
        try:
            code = worker.wait(timeout=60)
        finally:
            stop_processes([worker])
        lines = [line for line in err.read_text().splitlines() if line.strip()]
        assert code == 1, lines
        assert lines == [
            f"error: --embedded-redis: 127.0.0.1:{other.port} is taken (another Redis there?): "
            "drop --embedded-redis to use that one, or give --redis-url "
            "redis://127.0.0.1:PORT/0 with a free PORT"
        ]
        assert out.read_text() == ""
        assert other.running  # the other one is left alone
    finally:
        other.stop()


def test_a_url_it_cannot_serve_is_a_usage_error(settings: Settings, tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    url = "redis://:S3cret@db.example:6379/0"
    worker = _worker(settings, out, err, "--embedded-redis", "--redis-url", url)
    code = worker.wait(timeout=60)
    text = err.read_text()
    assert code == 2, text
    assert text.startswith("error: --embedded-redis starts a Redis on this machine")
    assert "S3cret" not in text


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("redis://localhost:6379/0", (6379, 0)),  # the default: where clients look
        ("redis://localhost", (6379, 0)),
        ("redis://127.0.0.1:7000/3", (7000, 3)),
    ],
)
def test_the_address_is_that_of_the_settings(url: str, address: tuple[int, int]) -> None:
    assert embedded_address(url) == address


@pytest.mark.parametrize(
    "url", ["rediss://localhost:6379/0", "redis://10.0.0.1:6379/0", "redis+cluster://localhost:1"]
)
def test_a_remote_or_other_kind_of_url_is_refused(url: str) -> None:
    with pytest.raises(EmbeddedRedisRefused, match="--embedded-redis starts a Redis"):
        embedded_address(url)
