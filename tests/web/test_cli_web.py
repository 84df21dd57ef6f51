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

# A fresh interpreter importing the web stack, then its first page: on a loaded
# machine (two test processes beside CPU hogs) that took more than 20 s.
STARTUP = 90.0
REQUEST = 30.0


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
        deadline = time.monotonic() + STARTUP
        answer = None
        while time.monotonic() < deadline:
            try:
                answer = httpx.get(
                    f"http://127.0.0.1:{port}/queues", auth=("admin", "pw"), timeout=REQUEST
                )
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert answer is not None, "the web command never answered"
        assert answer.status_code == 200
        assert "mail" in answer.text
        assert 'href="/jobs/dead"' in answer.text  # behind a proxy that serves it at /jobs
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=REQUEST).status_code == 401
        refused = httpx.post(
            f"http://127.0.0.1:{port}/queues/mail/pause", auth=("admin", "pw"), timeout=REQUEST
        )
        assert refused.status_code == 403  # --read-only
        # Bound to loopback: a rebinding page's Host is refused, localhost is not.
        rebind = {"host": "rebind.evil.example"}
        wrong = httpx.get(f"http://127.0.0.1:{port}/queues", headers=rebind, timeout=REQUEST)
        assert wrong.status_code == 400
        assert "--allowed-host" in wrong.text
        local = httpx.get(f"http://localhost:{port}/queues", auth=("admin", "pw"), timeout=REQUEST)
        assert local.status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=10)


def _serve(settings: Settings, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    command = [sys.executable, "-m", "cogworker_async", "web", "--port", str(port), *args]
    server = subprocess.Popen(
        command,
        cwd=ROOT,
        env=child_env(settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return server, port


def _get(port: int, host: str) -> int:
    deadline = time.monotonic() + STARTUP
    while True:
        try:
            url = f"http://127.0.0.1:{port}/queues"
            return httpx.get(url, headers={"host": host}, timeout=REQUEST).status_code
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_allowed_host_names_the_hosts_the_ui_answers(settings: Settings) -> None:
    server, port = _serve(settings, "--allowed-host", "jobs.example", "--allowed-host", "*.corp")
    try:
        assert _get(port, "jobs.example") == 200
        assert _get(port, "ci.corp:8080") == 200
        assert _get(port, "127.0.0.1") == 400  # the list replaces the default
        assert _get(port, "rebind.evil.example") == 400
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_bad_allowed_host_is_a_usage_error(settings: Settings) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cogworker_async", "web", "--allowed-host", "a*b.example"],
        cwd=ROOT,
        env=child_env(settings),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert b"bad allowed host 'a*b.example'" in done.stderr


def test_the_default_hosts_follow_the_bind() -> None:
    from cogworker_async.web.security import LOOPBACK_HOSTS, hosts_for_bind

    assert hosts_for_bind("127.0.0.1") == LOOPBACK_HOSTS
    assert hosts_for_bind("[::1]") == LOOPBACK_HOSTS
    assert hosts_for_bind("10.1.2.3") == ("10.1.2.3",)
    everywhere = hosts_for_bind("0.0.0.0")
    assert set(LOOPBACK_HOSTS) < set(everywhere)
    assert socket.gethostname().lower() in everywhere


def test_web_on_a_port_in_use_says_so_in_one_line_naming_the_option(settings: Settings) -> None:
    with socket.socket() as app:  # the user's app, already on the port
        app.bind(("127.0.0.1", 0))
        app.listen()
        port = app.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "cogworker_async", "web", "--port", str(port)],
            cwd=ROOT,
            env=child_env(settings),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: cannot listen on 127.0.0.1:{port} (Address already in use): is your app "
        f"there? Give the UI another port: --port {port + 1}"
    ]
    assert "Uvicorn running" not in done.stderr


def test_the_port_check_lets_a_free_port_and_port_zero_through() -> None:
    from cogworker_async.cli.web import port_taken

    assert port_taken("127.0.0.1", 0) is None
    assert port_taken("127.0.0.1", free_port()) is None
    assert port_taken("no-such-host.invalid", 8000) is not None
