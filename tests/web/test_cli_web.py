"""``cogworker-async web`` starts uvicorn and serves the UI."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.conftest import ROOT, child_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_web_command_starts_and_serves(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.sadd(keys.queues, "mail")
    port = free_port()
    env = child_env(settings, COGWORKER_WEB_AUTH="admin:pw")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cogworker_async",
            "web",
            "--port",
            str(port),
            "--read-only",
            "--root-path",
            "/jobs",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        answer = None
        while time.monotonic() < deadline:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/queues", auth=("admin", "pw"))
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert answer is not None, "the web command never answered"
        assert answer.status_code == 200
        assert "mail" in answer.text
        assert 'href="/jobs/dead"' in answer.text  # behind a proxy that serves it at /jobs
        assert httpx.get(f"http://127.0.0.1:{port}/").status_code == 401
        refused = httpx.post(f"http://127.0.0.1:{port}/queues/mail/pause", auth=("admin", "pw"))
        assert refused.status_code == 403  # --read-only
    finally:
        server.terminate()
        server.wait(timeout=10)
