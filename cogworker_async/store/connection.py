"""Redis connections sized for a worker, and the server's capabilities."""

from __future__ import annotations

from typing import Any

from hiredis import pack_command as hiredis_pack
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from cogworker_async.settings import Settings

DEFAULT_POOL_SIZE = 64


class HiredisPacking(AbstractConnection):
    """Commands packed by hiredis (C), not redis-py's asyncio packer (Python).

    redis-py's asyncio connection packs every argument in Python; a fetch
    call carries one argument per acknowledged job, and packing them was a
    sixth of a worker's CPU. hiredis packs the same bytes about six times
    faster. What it refuses (say, ``None`` or a bool) goes to redis-py's
    packer, which raises its usual ``DataError``.
    """

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]
        # As redis-py does: "CONFIG GET" is sent as two arguments.
        if (isinstance(first, str) and " " in first) or (
            isinstance(first, bytes) and b" " in first
        ):
            args = (*first.split(), *args[1:])
        try:
            return [hiredis_pack(args)]
        except TypeError:
            return super().pack_command(*args)


def _with_hiredis_packing(pool: BlockingConnectionPool) -> None:
    base = pool.connection_class
    if issubclass(base, HiredisPacking):
        return
    # Whatever class the URL chose (TCP, TLS, unix socket), with the packer on top.
    pool.connection_class = type(f"Hiredis{base.__name__}", (HiredisPacking, base), {})


def connect(settings: Settings, *, max_connections: int | None = None) -> Redis:
    """An asyncio client with bounded socket timeouts (a dead link can't hang a duty).

    The pool blocks when full instead of raising, so thousands of concurrent
    ``enqueue`` calls queue up for a connection rather than fail.
    """
    pool = BlockingConnectionPool.from_url(
        settings.redis_url,
        max_connections=max_connections or DEFAULT_POOL_SIZE,
        timeout=settings.socket_timeout,
        socket_timeout=settings.socket_timeout,
        socket_connect_timeout=min(settings.socket_timeout, 5.0),
        # No silent retries: a script call retried after its reply was lost
        # would run twice. Every caller decides itself what a failure means.
        retry=Retry(NoBackoff(), 0),
    )
    _with_hiredis_packing(pool)
    return Redis.from_pool(pool)  # the client owns the pool and closes it


async def drop_idle_connections(redis: Redis) -> None:
    """Close the pool's idle connections once an outage is seen.

    They died with the server: kept, each would fail its first command after
    Redis is back (and be logged as a second outage). Commands are never
    retried automatically, so this is how stale links are shed.
    """
    await redis.connection_pool.disconnect(inuse_connections=False)


def blocking_timeout(settings: Settings) -> float:
    """The blocking-fetch timeout: the idle fallback interval, below the socket timeout."""
    return settings.fetch_idle_max_interval


async def server_version(redis: Redis) -> tuple[int, ...]:
    """The server's version; connection errors propagate so the caller asks again later."""
    info = await redis.info("server")
    raw = str(info.get("redis_version", "0"))
    parts = []
    for piece in raw.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)
