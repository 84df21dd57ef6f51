"""``cogworker-async worker`` started before its Redis waits for it, as an embedded worker does.

Issue 25: it exited 1 after half a second when Redis was down. Now it logs
once, pings again with a back-off, starts when Redis comes, and a signal while
it waits is a prompt, clean stop (exit 0). Real processes, a real redis-server
started after the worker.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis as sync_redis

from cogworker_async import payload
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.conftest import spawn_worker_command
from tests.helpers import stop_processes, wait_for_sync
from tests.servers import free_port


@pytest.fixture
def down_settings(settings: Settings) -> Settings:
    """Settings naming a port where no Redis listens (yet)."""
    return settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"})


@pytest.fixture
def worker_log(tmp_path: Path) -> Path:
    return tmp_path / "worker.log"


def _says(log: Path, text: str) -> bool:
    return log.exists() and text in log.read_text(errors="replace")


def test_the_worker_waits_for_redis_and_starts_when_it_comes(
    down_settings: Settings, worker_log: Path
) -> None:
    url = down_settings.redis_url
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with worker_log.open("wb") as log:
        worker = spawn_worker_command(down_settings, log)
    server = EmbeddedRedis(port=port)
    try:
        wait_for_sync(lambda: _says(worker_log, f"waiting for Redis at {url} ("), timeout=60)
        time.sleep(1.0)  # a few back-off rounds while Redis is still away
        assert worker.poll() is None, worker_log.read_text()
        assert worker_log.read_text().count("waiting for Redis") == 1  # said once
        server.start()
        client = sync_redis.Redis.from_url(url)
        keys = Keys(down_settings.namespace)
        job = payload.build("t.record", [1], {}, "default", now=time.time())
        client.lpush(keys.queue("default"), payload.encode_job(job))
        client.sadd(keys.queues, "default")

        def processed() -> bool:
            return int(client.get(keys.stats_processed) or 0) == 1

        wait_for_sync(processed, timeout=60)
        assert worker.poll() is None
        stop_processes([worker])
        assert worker.returncode == 0, worker_log.read_text()
        client.close()
    finally:
        stop_processes([worker])
        server.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_waiting_stops_promptly_with_exit_0(
    down_settings: Settings, worker_log: Path, sig: signal.Signals
) -> None:
    secret = down_settings.redis_url.replace("redis://", "redis://u:S3cret@")
    with worker_log.open("wb") as log:
        worker = spawn_worker_command(down_settings.model_copy(update={"redis_url": secret}), log)
    masked = secret.replace("S3cret", "***")
    try:
        wait_for_sync(lambda: _says(worker_log, f"waiting for Redis at {masked} ("), timeout=60)
        worker.send_signal(sig)
        started = time.monotonic()
        code = worker.wait(timeout=30)
        took = time.monotonic() - started
    finally:
        stop_processes([worker])
    text = worker_log.read_text()
    assert code == 0, text
    assert took < 10, took  # the back-off (2 s at most) does not delay a stop
    assert "Traceback" not in text
    assert "stopped while waiting for Redis" in text
    assert "S3cret" not in text
