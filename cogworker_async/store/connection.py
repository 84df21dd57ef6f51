"""Redis connections sized for a worker, and the server's capabilities.

The one place a ``redis_url`` becomes a client: one server (``redis://``,
``rediss://``, ``unix://``), a Redis Cluster (``redis+cluster://``, redis-py's
``RedisCluster``) or the primary a set of sentinels watches
(``redis+sentinel://``, redis-py's ``Sentinel.master_for``). Callers get an
object with ``Redis``'s commands either way: every key of a namespace is in
one slot (the namespace is hash-tagged on a cluster, checked by ``Settings``),
so every script and pipeline the package sends is single-slot.
"""

from __future__ import annotations

from typing import Any, cast

import anyio
import redis as sync_redis
import redis.asyncio.cluster as async_cluster
import redis.asyncio.sentinel as async_sentinel
import redis.cluster as sync_cluster
import redis.sentinel as sync_sentinel
from hiredis import pack_command as hiredis_pack
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.retry import Retry as SyncRetry

from cogworker_async.settings import Settings
from cogworker_async.store.faults import reply_text
from cogworker_async.topology import Topology, is_multi_node, parse_topology

DEFAULT_POOL_SIZE = 64
# A cluster node's pool raises MaxConnectionsError at once when full (redis-py
# #3135, #2522) instead of waiting: the pools are sized above any demand.
CLUSTER_POOL_FLOOR = 256


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


def connect(
    settings: Settings, *, max_connections: int | None = None, client_name: str | None = None
) -> Redis:
    """An asyncio client with bounded socket timeouts (a dead link can't hang a duty).

    ``client_name``: each connection names itself so (``CLIENT SETNAME`` as it
    connects; one server only), for ``unblock_named``.

    The pool blocks when full instead of raising, so thousands of concurrent
    ``enqueue`` calls queue up for a connection rather than fail. On a cluster
    each node has its own pool, which raises when full: it gets room for
    ``max_connections`` and at least ``CLUSTER_POOL_FLOOR``.
    """
    if is_multi_node(settings.redis_url):
        return _connect_multi(settings, parse_topology(settings.redis_url), max_connections)
    pool = BlockingConnectionPool.from_url(
        settings.redis_url,
        max_connections=max_connections or DEFAULT_POOL_SIZE,
        timeout=settings.socket_timeout,
        socket_timeout=settings.socket_timeout,
        socket_connect_timeout=min(settings.socket_timeout, 5.0),
        # No silent retries: a script call retried after its reply was lost
        # would run twice. Every caller decides itself what a failure means.
        retry=Retry(NoBackoff(), 0),
        client_name=client_name,
    )
    _with_hiredis_packing(pool)
    return Redis.from_pool(pool)  # the client owns the pool and closes it


async def keep_names_if_allowed(blocking: Redis, probe: Redis) -> bool:
    """Whether the user may name its connections (``CLIENT SETNAME``); if not, the
    connections ``blocking`` opens from now on go unnamed rather than fail to open.

    An ACL without ``+client|setname`` refuses the name each connection sends as
    it connects, and every blocking wait would fail. Asked on ``probe`` (one
    connection, its name set and cleared in one pipeline). Unnamed waits still
    end: a stop then waits for Redis's own timeout (``fetch_idle_max_interval``).
    A client that names no connections (a cluster's, a sentinel's): True, no call.
    """
    pool = getattr(blocking, "connection_pool", None)
    if pool is None or not pool.connection_kwargs.get("client_name"):
        return True
    async with probe.pipeline(transaction=False) as pipe:
        pipe.execute_command("CLIENT", "SETNAME", "cogworker-probe")
        pipe.execute_command("CLIENT", "SETNAME", "")
        named, _cleared = await pipe.execute(raise_on_error=False)
    if isinstance(named, ResponseError):
        pool.connection_kwargs.pop("client_name", None)
        return False
    if isinstance(named, Exception):
        raise named
    return True


async def unblock_named(redis: Redis, name: str) -> int:
    """End, as if timed out, every blocking command the connections named ``name``
    have waiting on the server (``CLIENT UNBLOCK``): how many there were.

    Once it returns, none of them can take a job any more, whatever their own
    client does with its socket. Best effort: 0 when the server refuses the
    commands (or the connections are not named: a cluster's, a sentinel's).
    """
    try:
        clients = await redis.client_list(_type="normal")
        ended = 0
        for client in clients:
            if client.get("name") == name and "b" in client.get("flags", ""):
                ended += bool(await redis.client_unblock(int(client["id"])))
    except Exception:  # noqa: BLE001 - the caller waits for the wait's own timeout then
        return 0
    return ended


def _demoted(exc: ResponseError) -> bool:
    """A write refused because the primary became a replica, as a script reports it.

    Redis before 7 wraps the ``READONLY`` a script meets in the script's own
    error, so redis-py sees a plain ``ResponseError`` and its sentinel link,
    which drops itself on ``ReadOnlyError`` only, would stay on the demoted
    server for good: a thread's client running one script (the heartbeat) never
    left it.
    """
    return reply_text(exc).startswith("READONLY")


class _PrimaryLink(async_sentinel.SentinelManagedConnection):
    """A link to the sentinels' primary that also drops itself on a script's READONLY."""

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **kwargs)
        except ResponseError as exc:
            if self.connection_pool.is_master and _demoted(exc):
                # As redis-py does for a bare READONLY: the next connect asks
                # the sentinels where the primary is now.
                await self.disconnect()
                raise RedisConnectionError("The previous master is now a slave") from exc
            raise


class _PrimaryTLSLink(_PrimaryLink, async_sentinel.SentinelManagedSSLConnection):
    pass


class _SyncPrimaryLink(sync_sentinel.SentinelManagedConnection):
    """The same, for a thread's blocking client."""

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except ResponseError as exc:
            if self.connection_pool.is_master and _demoted(exc):
                self.disconnect()  # type: ignore[no-untyped-call]
                raise RedisConnectionError("The previous master is now a slave") from exc
            raise


class _SyncPrimaryTLSLink(_SyncPrimaryLink, sync_sentinel.SentinelManagedSSLConnection):
    pass


class _SentinelPrimary(Redis):
    """The primary a set of sentinels names; closing it closes the links to them too.

    ``Sentinel`` keeps one client per sentinel (each with its own pool) for
    discovery, and ``master_for``'s client does not own them (redis-py #3201):
    left open, their sockets are reported unclosed when collected.
    """

    watchers: async_sentinel.Sentinel | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        try:
            await super().aclose(close_connection_pool)
        finally:
            if self.watchers is not None:
                await self.watchers.aclose()


class _SyncSentinelPrimary(sync_redis.Redis):
    """The same, for a thread's blocking client."""

    watchers: sync_sentinel.Sentinel | None = None

    def close(self) -> None:
        super().close()
        if self.watchers is not None:
            for watcher in self.watchers.sentinels:
                watcher.close()


def _timeouts(settings: Settings) -> dict[str, Any]:
    return {
        "socket_timeout": settings.socket_timeout,
        "socket_connect_timeout": min(settings.socket_timeout, 5.0),
    }


def _auth(topology: Topology) -> dict[str, Any]:
    return {"username": topology.username, "password": topology.password}


def _connect_multi(settings: Settings, topology: Topology, max_connections: int | None) -> Redis:
    if topology.kind == "cluster":
        client = async_cluster.RedisCluster(
            startup_nodes=[async_cluster.ClusterNode(h, p) for h, p in topology.nodes],
            max_connections=max(max_connections or DEFAULT_POOL_SIZE, CLUSTER_POOL_FLOOR),
            # No silent re-sends (a script would run twice); MOVED and ASK are
            # still followed, inside the client, without counting as a retry.
            retry=Retry(NoBackoff(), 0),
            ssl=topology.tls,
            **_timeouts(settings),
            **_auth(topology),
        )
        # Typed as Redis: the commands the package sends are the same on both.
        return cast(Redis, client)
    assert topology.service is not None
    sentinel = async_sentinel.Sentinel(
        list(topology.nodes),
        sentinel_kwargs={**_timeouts(settings), "ssl": topology.tls},
        ssl=topology.tls,
        db=topology.db,
        retry=Retry(NoBackoff(), 0),
        **_timeouts(settings),
        **_auth(topology),
    )
    # Each new connection asks the sentinels where the primary is now, so after
    # a failover the next command (once the old links have failed) reaches it.
    primary = sentinel.master_for(
        topology.service,
        redis_class=_SentinelPrimary,
        connection_class=_PrimaryTLSLink if topology.tls else _PrimaryLink,
        max_connections=max_connections or DEFAULT_POOL_SIZE,
    )
    primary.watchers = sentinel
    return cast(Redis, primary)


async def discovered(redis: Redis, bound: float) -> None:
    """A cluster client's topology read now, shielded from cancellation (bounded).

    Cancelled midway through its first discovery, redis-py's cluster client
    leaks the connection it was reading the slots on; a duty cancelled at
    shutdown right after it started did just that. A failure is left for the
    first command to meet (and classify). A no-op for other clients.
    """
    if not isinstance(redis, async_cluster.RedisCluster):
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(bound):
        try:
            await redis.initialize()
        except Exception:  # noqa: BLE001 - the first command meets it again, and reports it
            return


def is_cluster(redis: object) -> bool:
    """Whether ``redis`` is a cluster client (its pipelines refuse some commands)."""
    return isinstance(redis, async_cluster.RedisCluster | sync_cluster.RedisCluster)


def connect_sync(
    settings: Settings, *, socket_timeout: float, socket_connect_timeout: float
) -> sync_redis.Redis:
    """A blocking client for a thread (the heartbeat, a metrics scrape), never retrying."""
    timeouts: dict[str, Any] = {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": socket_connect_timeout,
    }
    retry = SyncRetry(NoBackoff(), 0)
    if not is_multi_node(settings.redis_url):
        return sync_redis.Redis.from_url(settings.redis_url, retry=retry, **timeouts)
    topology = parse_topology(settings.redis_url)
    if topology.kind == "cluster":
        client = sync_cluster.RedisCluster(
            startup_nodes=[
                sync_cluster.ClusterNode(h, p)  # type: ignore[no-untyped-call]
                for h, p in topology.nodes
            ],
            retry=retry,
            ssl=topology.tls,
            **timeouts,
            **_auth(topology),
        )
        return cast(sync_redis.Redis, client)
    assert topology.service is not None
    sentinel = sync_sentinel.Sentinel(
        list(topology.nodes),
        sentinel_kwargs={**timeouts, "ssl": topology.tls},
        ssl=topology.tls,
        db=topology.db,
        retry=retry,
        **timeouts,
        **_auth(topology),
    )
    primary = sentinel.master_for(
        topology.service,
        redis_class=_SyncSentinelPrimary,
        connection_class=_SyncPrimaryTLSLink if topology.tls else _SyncPrimaryLink,
    )
    primary.watchers = sentinel
    return cast(sync_redis.Redis, primary)


async def drop_idle_connections(redis: Redis) -> None:
    """Close the pool's idle connections once an outage is seen.

    They died with the server: kept, each would fail its first command after
    Redis is back (and be logged as a second outage). Commands are never
    retried automatically, so this is how stale links are shed. A cluster
    client sheds them itself, node by node, when one fails.
    """
    pool = getattr(redis, "connection_pool", None)
    if pool is not None:
        await pool.disconnect(inuse_connections=False)


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
