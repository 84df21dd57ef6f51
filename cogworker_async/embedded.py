"""A throwaway ``redis-server`` for development, the demo and the test suite.

The library must never touch a Redis it does not own when it is being tried out or
tested: a shared server holds other people's data, and fault tests kill, pause and
restart the server on purpose. :class:`EmbeddedRedis` starts a private, non-persistent
server in a temporary directory, waits until it really answers, and can crash, stall
and revive it on the same address so outage tests see what production clients would.

Nothing here is global: every instance owns its process and directory, and
:meth:`EmbeddedRedis.stop` (or leaving the ``with`` block) releases both.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from cogworker_async.redis_server import answers_ping, find_redis_server, tail

__all__ = ["EmbeddedRedis", "EmbeddedRedisError"]

_HOST = "127.0.0.1"
_READY_TIMEOUT = 10.0
_READY_POLL = 0.02
_STOP_GRACE = 5.0
_PORT_ATTEMPTS = 5
_LOG_TAIL_LINES = 25


class EmbeddedRedisError(RuntimeError):
    """The embedded ``redis-server`` could not be found, started or controlled."""


def _pick_free_port() -> int:
    # The OS hands out a port nobody is listening on right now; another process may
    # still grab it before redis-server binds, which is why start() retries.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        port: int = sock.getsockname()[1]
        return port


class _PortTakenError(EmbeddedRedisError):
    """Startup failed only because another process owns the port (worth a retry)."""


class EmbeddedRedis:
    """A private ``redis-server`` process living in its own temporary directory.

    The address (TCP port or unix socket path) stays fixed from the first successful
    :meth:`start` until :meth:`stop`, across :meth:`kill` and :meth:`restart`, so
    clients built from :attr:`url` keep working after a simulated outage. After
    :meth:`stop` a new :meth:`start` begins afresh (new directory, and a new port
    unless one was given).
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        unix_socket: bool = False,
        binary: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        if port is not None and unix_socket:
            raise ValueError("port and unix_socket=True are mutually exclusive")
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port must be in 1..65535, got {port}")
        self._requested_port = port
        self._unix_socket = unix_socket
        self._binary = binary
        self._extra_args = tuple(extra_args)
        self._resolved_binary: str | None = None
        self._dir: Path | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # -- properties ------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0`` or ``unix:///…/redis.sock?db=0``."""
        if self._dir is None:
            raise EmbeddedRedisError("the embedded redis-server has not been started")
        if self._unix_socket:
            return f"unix://{self.socket_path}?db=0"
        return f"redis://{_HOST}:{self._port}/0"

    @property
    def port(self) -> int | None:
        """The TCP port, or ``None`` in unix-socket mode or before an auto port is picked."""
        if self._unix_socket:
            return None
        return self._port if self._port is not None else self._requested_port

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (paused counts as running), else ``None``."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        return self._proc.pid

    @property
    def running(self) -> bool:
        """Whether the server process is alive (it may still be paused)."""
        return self.pid is not None

    @property
    def directory(self) -> Path | None:
        """The temporary working directory (log, socket), ``None`` once stopped."""
        return self._dir

    @property
    def socket_path(self) -> Path | None:
        """The unix socket path in unix-socket mode, else ``None``."""
        if not self._unix_socket or self._dir is None:
            return None
        return self._dir / "redis.sock"

    @property
    def log_path(self) -> Path | None:
        """The server's log file, ``None`` once stopped."""
        return None if self._dir is None else self._dir / "redis.log"

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start the server and return once it answers ``PING``.

        A no-op while it is already running. After :meth:`kill` (or a crash) it
        comes back on the same address; after :meth:`stop` it starts afresh.
        """
        if self.running:
            return
        if self._resolved_binary is None:
            try:
                self._resolved_binary = find_redis_server(self._binary)
            except LookupError as exc:
                raise EmbeddedRedisError(str(exc)) from None
        if self._dir is not None:
            self._spawn_and_wait()
            return
        self._dir = Path(tempfile.mkdtemp(prefix="cogworker-redis-"))
        started = False
        try:
            self._first_start()
            started = True
        finally:
            if not started:
                # A failed start must not leak the directory; the address was never handed out.
                self._discard_dir()

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 5 s) and remove its directory.

        Safe to call any number of times, also on a paused or already dead server.
        """
        proc, self._proc = self._proc, None
        if proc is not None:
            self._terminate(proc)
        self._discard_dir()

    def kill(self) -> None:
        """SIGKILL the server as a crash would; the directory and address are kept."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        proc.wait()

    def restart(self) -> None:
        """Stop the current process (if any) and start a new one on the same address."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._terminate(proc)
        self.start()

    def pause_process(self) -> None:
        """SIGSTOP the server: connections stay open but nothing is answered."""
        self._signal(signal.SIGSTOP)

    def resume_process(self) -> None:
        """SIGCONT a server paused by :meth:`pause_process`."""
        self._signal(signal.SIGCONT)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.socket_path if self._unix_socket else self.port
        return f"<EmbeddedRedis {where} pid={self.pid}>"

    # -- internals -------------------------------------------------------------------

    def _first_start(self) -> None:
        if self._unix_socket or self._requested_port is not None:
            self._port = self._requested_port
            self._spawn_and_wait()
            return
        last_error: EmbeddedRedisError | None = None
        for _ in range(_PORT_ATTEMPTS):
            self._port = _pick_free_port()
            try:
                self._spawn_and_wait()
            except _PortTakenError as error:
                last_error = error
                continue
            return
        self._port = None
        assert last_error is not None
        raise EmbeddedRedisError(
            f"gave up after {_PORT_ATTEMPTS} free ports were taken before redis-server "
            f"could bind them; last failure:\n{last_error}"
        )

    def _command(self) -> list[str]:
        assert self._dir is not None
        assert self._resolved_binary is not None
        args = [
            self._resolved_binary,
            "--bind", _HOST,
            # An empty save list is how redis spells "never write an RDB snapshot".
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self._dir),
            "--daemonize", "no",
            "--logfile", str(self._dir / "redis.log"),
        ]  # fmt: skip
        if self._unix_socket:
            args += [
                "--port", "0",
                "--unixsocket", str(self._dir / "redis.sock"),
                "--unixsocketperm", "700",
            ]  # fmt: skip
        else:
            args += ["--port", str(self._port)]
        args += self._extra_args
        return args

    def _spawn_and_wait(self) -> None:
        assert self._dir is not None
        log = self._dir / "redis.log"
        stderr_path = self._dir / "redis.stderr"
        # Only what this attempt wrote is relevant to its failure; the log survives
        # kill()/restart() so earlier runs can still be read when debugging.
        log_offset = log.stat().st_size if log.exists() else 0
        stderr_offset = stderr_path.stat().st_size if stderr_path.exists() else 0
        # Errors redis finds before it opens its logfile (bad arguments) only reach stderr.
        with stderr_path.open("ab") as stderr:
            proc = self._popen(stderr)
        self._proc = proc
        deadline = time.monotonic() + _READY_TIMEOUT
        while True:
            if proc.poll() is not None:
                self._proc = None
                self._raise_start_failure(
                    f"redis-server exited with status {proc.returncode} during startup",
                    log_offset,
                    stderr_offset,
                )
            if self._answers_ping():
                return
            if time.monotonic() >= deadline:
                self._proc = None
                proc.kill()
                proc.wait()
                self._raise_start_failure(
                    f"redis-server did not answer PING within {_READY_TIMEOUT:g} s",
                    log_offset,
                    stderr_offset,
                )
            time.sleep(_READY_POLL)

    def _popen(self, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
        try:
            # The command is built from our own arguments and a resolved executable
            # path, never through a shell.
            return subprocess.Popen(  # noqa: S603
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                cwd=self._dir,
            )
        except OSError as error:
            raise EmbeddedRedisError(
                f"could not execute {self._resolved_binary!r}: {error}"
            ) from error

    def _raise_start_failure(self, reason: str, log_offset: int, stderr_offset: int) -> None:
        assert self._dir is not None
        log_tail = tail(self._dir / "redis.log", log_offset, _LOG_TAIL_LINES)
        stderr_tail = tail(self._dir / "redis.stderr", stderr_offset, _LOG_TAIL_LINES)
        details = "\n".join(part for part in (stderr_tail, log_tail) if part)
        message = f"{reason} (address {self._address()})"
        if details:
            message += f"; last output:\n{details}"
        # An auto-picked port can be stolen between picking and binding; only that
        # case is worth retrying with another port.
        port_taken = "Address already in use" in details
        if port_taken and self._requested_port is None and not self._unix_socket:
            raise _PortTakenError(message)
        raise EmbeddedRedisError(message)

    def _address(self) -> str:
        if self._unix_socket:
            return str(self.socket_path)
        return f"{_HOST}:{self._port}"

    def _answers_ping(self) -> bool:
        if self._unix_socket:
            return answers_ping(unix_socket=self.socket_path)
        assert self._port is not None
        return answers_ping(host=_HOST, port=self._port)

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
            # A paused server would sit on SIGTERM forever and cost the full grace
            # period; waking it lets it shut down cleanly right away.
            proc.send_signal(signal.SIGCONT)
        try:
            proc.wait(timeout=_STOP_GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()

    def _signal(self, signum: signal.Signals) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise EmbeddedRedisError("the embedded redis-server is not running")
        proc.send_signal(signum)

    def _discard_dir(self) -> None:
        directory, self._dir = self._dir, None
        self._port = None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
