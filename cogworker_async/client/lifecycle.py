"""A client's connection and what it holds for its life: made once, closed once
(``async with`` or ``close()``), shared by its enqueue paths and its questions."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import TracebackType
from typing import Self

from redis.asyncio import Redis

from cogworker_async.client.by_name import LiveCheck
from cogworker_async.client.pushes import Pushes
from cogworker_async.client.result_checks import NoReaderNotice
from cogworker_async.client.tracking import StatusWriter
from cogworker_async.client.waiters import ResultWaiters
from cogworker_async.keys import Keys
from cogworker_async.middleware import ClientMiddleware
from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect

log = logging.getLogger("cogworker_async.client")


class ClientConnection:
    """The connection pool (made here unless given), the settings and keys, and the
    helpers made on first use; ``close()`` finishes and closes what this made."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        redis: Redis | None = None,
        middleware: Sequence[ClientMiddleware] = (),
    ) -> None:
        self.settings = settings or Settings()
        self.keys = Keys(self.settings.namespace)
        self._own_redis = redis is None
        self.redis = redis if redis is not None else connect(self.settings)
        self.middleware = list(middleware)
        self._pushes = Pushes(self.redis, self.keys)
        # Enqueue by name only: what the live processes say, and what was said.
        self._live = LiveCheck(
            self.redis, self.keys, heartbeat_interval=self.settings.heartbeat_interval
        )
        self._status: StatusWriter | None = None  # made by the first job that tracks it
        # Made by the first result(): one connection for every waiter (none on a
        # cluster, where each waiter blocks on a pooled connection instead).
        self._waiters: ResultWaiters | None = None
        self._no_reader = NoReaderNotice(self._live)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Finish pending status writes, then close the connection pool if this client made it."""
        if self._waiters is not None:
            await self._waiters.close()
            self._waiters = None
        if self._status is not None:
            await self._status.drain()
        if self._own_redis:
            await self.redis.aclose()

    def _status_writer(self) -> StatusWriter:
        """The best-effort status writer, made by the first job that tracks its status."""
        if self._status is None:
            self._status = StatusWriter(self.redis, self.keys, self.settings.status_ttl, log)
        return self._status
