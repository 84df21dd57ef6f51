"""The web UI's one Redis client, whether or not the app's lifespan runs.

The ``web`` command (and any host that runs the UI's lifespan) opens the
client at lifespan start and closes it at the end. A UI *mounted* in another
app never sees a lifespan (Starlette and FastAPI don't run a mounted app's),
so its first request makes the client instead, and every later request on the
same event loop shares it: a page or a poll does not connect anew.

Closing that lazily made client: nothing tells a mounted app that its host is
stopping, but the event loop does. The client is held by a suspended async
generator; asyncio's runner (``asyncio.run``, uvicorn, anyio, Starlette's
test client) closes every such generator in ``shutdown_asyncgens`` while the
loop still runs, before closing it, and the generator's ``finally`` closes the
client then. A host that runs requests on several event loops at once gets,
on any loop but the first, a client per request, closed when it is answered
(a client's connections belong to one loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis

from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect

SHARED_POOL_SIZE = 8
"""Connections the shared client keeps: pages and polls are few, each a short pipeline."""
OWN_POOL_SIZE = 4
"""Connections of a client made for one request (a second event loop's)."""


async def _held(client: Redis) -> AsyncGenerator[None, None]:
    """Suspended for the client's life; closed (by ``close`` or by the loop's
    ``shutdown_asyncgens``), it closes the client."""
    try:
        yield
    finally:
        await client.aclose()


class SharedRedis:
    """The app's one client: the lifespan's (``open``/``close``), else made by the first
    request (``for_request``) and closed with its event loop or the lifespan's end."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.client: Redis | None = None  # the lifespan's, while it runs
        self._lazy: Redis | None = None
        self._lazy_loop: asyncio.AbstractEventLoop | None = None
        self._keeper: AsyncGenerator[None, None] | None = None

    def open(self) -> None:
        """The lifespan starts: one client for every request until ``close``."""
        self.client = connect(self._settings, max_connections=SHARED_POOL_SIZE)

    async def close(self) -> None:
        """The lifespan ends: close its client, and one a request made before it began."""
        client, self.client = self.client, None
        try:
            if client is not None:
                await client.aclose()
        finally:
            await self._drop_lazy()

    @property
    def lazy(self) -> Redis | None:
        """The client a request made (no lifespan ran), while it is open."""
        return self._lazy

    @asynccontextmanager
    async def for_request(self) -> AsyncIterator[Redis]:
        """The client this request reads through."""
        if self.client is not None:
            yield self.client
            return
        loop = asyncio.get_running_loop()
        if self._lazy is not None and self._lazy_loop is not loop:
            if self._lazy_loop is not None and not self._lazy_loop.is_closed():
                # Another loop still runs and owns that client: one of our own, for now.
                own = connect(self._settings, max_connections=OWN_POOL_SIZE)
                try:
                    yield own
                finally:
                    await own.aclose()
                return
            # Its loop is gone, and shutdown_asyncgens closed it with the loop.
            self._lazy = self._lazy_loop = self._keeper = None
        if self._lazy is None:
            client = connect(self._settings, max_connections=SHARED_POOL_SIZE)
            keeper = _held(client)
            await keeper.asend(None)  # first iteration: asyncio now tracks it
            self._lazy, self._lazy_loop, self._keeper = client, loop, keeper
        yield self._lazy

    async def _drop_lazy(self) -> None:
        keeper, loop = self._keeper, self._lazy_loop
        self._lazy = self._lazy_loop = self._keeper = None
        if keeper is not None and loop is asyncio.get_running_loop():
            await keeper.aclose()
