"""``worker --embedded-redis``: a throwaway redis-server at the address clients expect.

It listens where the settings point (``--redis-url``, else
``COGWORKER_REDIS_URL``, else the default ``redis://localhost:6379/0``), so a
client or a CLI command with the same settings reaches it, and never a
different Redis: if that port is taken (another Redis there?) the worker stops
with one line naming the option instead of starting one elsewhere. Its URL is
printed on stdout as ``COGWORKER_REDIS_URL=...``, ready to ``export``.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from cogworker_async.embedded import EmbeddedRedis, EmbeddedRedisError
from cogworker_async.settings import mask_url

LOCAL_HOSTS = ("localhost", "127.0.0.1")


class EmbeddedRedisRefused(Exception):
    """One line saying why ``--embedded-redis`` cannot start; ``code`` is the exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def embedded_address(redis_url: str) -> tuple[int, int]:
    """(port, DB index) of the embedded Redis for ``redis_url``; a URL it cannot serve raises.

    Only a plain ``redis://`` URL of this machine without a password: the
    embedded server is local and has none.
    """
    parts = urlsplit(redis_url)
    if parts.scheme != "redis" or parts.hostname not in LOCAL_HOSTS or parts.password:
        raise EmbeddedRedisRefused(
            "--embedded-redis starts a Redis on this machine, at the address of --redis-url "
            "or COGWORKER_REDIS_URL: that must be redis://127.0.0.1:PORT/DB (or localhost, "
            f"no password), not {mask_url(redis_url)}",
            2,
        )
    path = parts.path.strip("/")
    return parts.port or 6379, int(path) if path else 0


def start_embedded(redis_url: str) -> tuple[EmbeddedRedis, str]:
    """Start the embedded Redis at ``redis_url``'s port; returns it and its URL."""
    port, db = embedded_address(redis_url)
    taken = EmbeddedRedisRefused(
        f"--embedded-redis: 127.0.0.1:{port} is taken (another Redis there?): "
        "drop --embedded-redis to use that one, or give --redis-url "
        "redis://127.0.0.1:PORT/0 with a free PORT",
        1,
    )
    # Looked at first: EmbeddedRedis takes a PING from whatever listens on its
    # port as its own server's, so a Redis already there would pass as started.
    if _taken(port):
        raise taken
    server = EmbeddedRedis(port=port)
    try:
        server.start()
    except EmbeddedRedisError as exc:
        if "Address already in use" in str(exc):  # taken in the meantime
            raise taken from None
        raise EmbeddedRedisRefused(f"--embedded-redis: {exc}", 1) from None
    return server, f"redis://127.0.0.1:{port}/{db}"


def _taken(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port`` (a bind there fails)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # A port in TIME_WAIT is free for redis-server (it sets this too).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False
