"""A TCP proxy between a client and Redis that can cut, refuse and stall connections.

Killing or pausing the Redis process (see ``cogworker_async.embedded``) simulates the
server going away, but not the network failing between a healthy client and a healthy
server: a dropped connection mid-command, a firewall refusing new ones, or a link that
silently stops delivering bytes. Fault tests put this proxy in the middle and flip
those failures on and off while the code under test keeps running.

The proxy runs its own event loop in a background thread, so sync tests can use it
and async tests do not have to share (or block) their loop with it. Every control
method is thread-safe and returns only once the change is in effect inside the
proxy, so a test can act on the new behaviour immediately.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

__all__ = ["FaultProxy"]

_HOST = "127.0.0.1"
_CHUNK = 65536
_CONTROL_TIMEOUT = 5.0

_T = TypeVar("_T")


class _Link:
    """One proxied client connection and its upstream half (once connected)."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.closed = False

    def abort(self) -> None:
        # abort() rather than close(): a cut must drop held and buffered bytes at once,
        # not politely flush them first.
        self.closed = True
        self.client.transport.abort()
        if self.upstream is not None:
            self.upstream.transport.abort()

    async def wait_closed(self) -> None:
        # Waiting for the sockets to be really closed makes cut() deterministic for the
        # caller, and lets close() stop the loop without leaking open sockets.
        writers = [w for w in (self.client, self.upstream) if w is not None]
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)


class FaultProxy:
    """Forward ``127.0.0.1:port`` to ``upstream_host:upstream_port``, with injectable faults.

    ``refuse()`` closes the listening socket, so new connections fail with
    ``ECONNREFUSED`` — the fastest failure a client can get (redis-py raises
    ``ConnectionError`` at connect time, with no handshake to time out) and the same
    one it sees when Redis is down. Turning it off listens on the same port again.
    """

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream_host = upstream_host
        self._upstream_port = upstream_port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        # Created lazily inside the proxy loop; set means bytes may flow.
        self._flowing: asyncio.Event | None = None
        self._refusing = False

    # -- public API (called from any thread) -----------------------------------------

    @property
    def port(self) -> int:
        """The local port clients connect to."""
        if self._port is None:
            raise RuntimeError("FaultProxy has not been started")
        return self._port

    @property
    def url(self) -> str:
        """A redis URL pointing at the proxy."""
        return f"redis://{_HOST}:{self.port}/0"

    @property
    def connection_count(self) -> int:
        """How many client connections the proxy currently holds open."""
        return self._call(self._count())

    def start(self) -> None:
        """Start the proxy thread and return once it is listening."""
        if self._thread is not None:
            raise RuntimeError("FaultProxy already started")
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        # daemon: a test that forgets close() must not hang interpreter exit.
        thread = threading.Thread(target=run, name=f"FaultProxy->{self._upstream_port}")
        thread.daemon = True
        thread.start()
        ready.wait()
        self._loop, self._thread = loop, thread
        try:
            self._call(self._listen())
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop listening, drop every connection and join the proxy thread. Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=_CONTROL_TIMEOUT)
        self._loop, self._thread = None, None
        if not thread.is_alive():
            loop.close()

    def cut(self) -> None:
        """Close every current connection, both sides, at once; new ones still work."""
        self._call(self._cut())

    def refuse(self, on: bool = True) -> None:
        """While on, new connections are refused and existing ones are cut."""
        self._call(self._refuse(on))

    def stall(self, on: bool = True) -> None:
        """While on, hold all bytes in both directions; off forwards them in order."""
        self._call(self._stall(on))

    def heal(self) -> None:
        """Turn refuse and stall off."""
        self.refuse(False)
        self.stall(False)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<FaultProxy :{self._port} -> {self._upstream_host}:{self._upstream_port} "
            f"refusing={self._refusing}>"
        )

    # -- loop side --------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        loop = self._loop
        if loop is None:
            coro.close()
            raise RuntimeError("FaultProxy is not running")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(_CONTROL_TIMEOUT)

    def _gate(self) -> asyncio.Event:
        if self._flowing is None:
            self._flowing = asyncio.Event()
            self._flowing.set()
        return self._flowing

    async def _count(self) -> int:
        return len(self._links)

    async def _listen(self) -> None:
        # Port 0 only the first time; refuse(False) must come back on the same port
        # because clients already hold the URL.
        self._server = await asyncio.start_server(self._accept, _HOST, self._port or 0)
        sockname = self._server.sockets[0].getsockname()
        self._port = int(sockname[1])

    async def _unlisten(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            # Stop accepting first and let the accepts already under way finish:
            # Python 3.11 leaks a socket it accepted when the server closes
            # before that connection's transport is made (Server._attach asserts).
            loop = asyncio.get_running_loop()
            for sock in server.sockets:
                loop.remove_reader(sock.fileno())
            for _ in range(5):
                await asyncio.sleep(0)
            server.close()
            # Since 3.12 wait_closed() also waits for accepted connections, so they
            # must be cut before this is awaited.
            await self._cut()
            await server.wait_closed()

    async def _cut(self) -> None:
        links, self._links = self._links, set()
        for link in links:
            link.abort()
        await asyncio.gather(*(link.wait_closed() for link in links))

    async def _refuse(self, on: bool) -> None:
        self._refusing = on
        if on:
            await self._unlisten()
            await self._cut()
        elif self._server is None:
            await self._listen()

    async def _stall(self, on: bool) -> None:
        gate = self._gate()
        if on:
            gate.clear()
        else:
            gate.set()

    async def _shutdown(self) -> None:
        self._refusing = True
        await self._unlisten()
        # A connection the listener took just before it closed is made a few loop
        # steps later (the loop's accept runs as a task of its own): let those steps
        # run, so it is refused and closed here rather than leaked when the loop stops.
        for _ in range(5):
            await asyncio.sleep(0)
        await self._cut()
        current = asyncio.current_task()
        tasks = [task for task in self._tasks if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for _ in range(5):  # abort() closes a socket one loop step later
            await asyncio.sleep(0)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A plain function, called as the connection is made: the link is tracked
        # (or refused) at once. A coroutine here would run as a task, and a task
        # cancelled by close() before its first step would leak the socket.
        link = _Link(writer)
        loop = asyncio.get_running_loop()
        if self._refusing:
            # Accepted in the instant before the listener closed: behave as refused.
            link.abort()
            self._track(loop.create_task(link.wait_closed()))
            return
        self._links.add(link)
        self._track(loop.create_task(self._connect(link, reader)))

    async def _connect(self, link: _Link, reader: asyncio.StreamReader) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self._upstream_host, self._upstream_port
            )
        except OSError:
            link.abort()
            self._links.discard(link)
            await link.wait_closed()
            return
        except asyncio.CancelledError:
            link.abort()
            self._links.discard(link)
            raise
        link.upstream = up_writer
        if link.closed:
            # cut() ran while the upstream connection was being opened.
            link.abort()
            await link.wait_closed()
            return
        loop = asyncio.get_running_loop()
        for source, sink in ((reader, up_writer), (up_reader, link.client)):
            self._track(loop.create_task(self._pump(link, source, sink)))

    def _track(self, task: asyncio.Task[Any] | None) -> None:
        # Tracked so close() can cancel and await them: a loop closed under a pending
        # task or an unclosed transport warns, and the suite turns warnings into errors.
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(
        self, link: _Link, source: asyncio.StreamReader, sink: asyncio.StreamWriter
    ) -> None:
        gate = self._gate()
        try:
            while True:
                data = await source.read(_CHUNK)
                if not data:
                    break
                # Waiting here while stalled keeps this chunk, and everything behind it
                # in the socket, in arrival order for when the stall ends.
                await gate.wait()
                if link.closed:
                    break
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # Either side going away ends the whole link; Redis has no use for half-open.
            link.abort()
            self._links.discard(link)
            # abort() only schedules the socket close; finishing it here means close()
            # never stops the loop with a transport still open.
            await link.wait_closed()
