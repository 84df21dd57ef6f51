"""``create_app``: the web UI as one ASGI app, mountable under any prefix.

Every page is a GET that only reads; every change is a POST that passes the
``Guard`` (auth, read-only, cross-site) before a handler sees it. Each request
reads Redis through the app's one shared client (``shared_client``: opened at
the app's lifespan start and closed at its end, or, mounted inside another app
whose lifespan never reaches a mounted app, made by the first request and
closed with the event loop).

A note ("paused mail") reaches the page after a POST in the redirect's query,
signed with a key made when the app is (``?note=`` text without its signature
is not shown: a link cannot put words in the UI's mouth).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cogworker_async.api import browsing
from cogworker_async.settings import Settings
from cogworker_async.web import actions, filters, views
from cogworker_async.web.pages import (
    MAX_FORM_BYTES,
    NAV,
    NOTE_CLIP,
    UI,
    back,
    first,
    form,
    note_of,
    redis_of,
    render,
    segment,
    ui_of,
    url,
)
from cogworker_async.web.params import BadParameter
from cogworker_async.web.security import (
    HEADERS,
    LOOPBACK_HOSTS,
    AuthHook,
    Guard,
    allowed_host_set,
)
from cogworker_async.web.shared_client import SharedRedis

__all__ = [
    "MAX_FORM_BYTES",
    "NAV",
    "NOTE_CLIP",
    "UI",
    "SharedRedis",
    "back",
    "create_app",
    "first",
    "form",
    "note_of",
    "redis_of",
    "render",
    "segment",
    "ui_of",
    "url",
]
"""``create_app``, and (from ``pages``, where they moved) the request helpers that the
views and actions once took from here."""

HERE = Path(__file__).resolve().parent


class RedisForRequest:
    """ASGI middleware: the Redis client a request reads through, the app's shared one
    (``shared_client.SharedRedis``: no connect per page or poll)."""

    def __init__(self, app: ASGIApp, *, settings: Settings, shared: SharedRedis) -> None:
        self.app = app
        self.settings = settings
        self.shared = shared

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def send_timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                # The app's own time, for the browser's network panel and the benchmark.
                spent = (time.perf_counter() - started) * 1000
                timing = (b"server-timing", f"app;dur={spent:.1f}".encode())
                message["headers"] = [*message.get("headers", []), timing]
            await send(message)

        async with self.shared.for_request() as client:
            scope.setdefault("state", {})["redis"] = client
            await self.app(scope, receive, send_timed)


def shared_client_lifespan(
    settings: Settings, shared: SharedRedis
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the shared client opened for it, closed after it."""

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        shared.open()
        try:
            yield
        finally:
            await shared.close()

    return lifespan


async def outage(request: Request, exc: Exception) -> Response:
    return render(request, "outage.html", status_code=503, problem=str(exc) or type(exc).__name__)


async def bad_parameter(request: Request, exc: Exception) -> Response:
    return render(request, "error.html", status_code=400, problem=str(exc), page="")


async def refused(request: Request, exc: Exception) -> Response:
    """A command the web UI's Redis user may not run: named, with what to grant."""
    problem = (
        f"Redis refused a command (NOPERM): {exc}. "
        "Grant the web UI's Redis user that command (ACL SETUSER ... +<command>)."
    )
    return render(request, "error.html", status_code=403, problem=problem, page="")


async def server_error(request: Request, exc: Exception) -> Response:
    """A bug: a line for the operator, the traceback in the log (not the page).

    Sent from outside every middleware (Starlette's ServerErrorMiddleware, which
    then raises the error again for the server to log), so it carries the
    security headers itself.
    """
    return PlainTextResponse(
        f"internal error ({type(exc).__name__}): see the server's log", 500, headers=HEADERS
    )


class Revalidated:
    """ASGI wrapper: the static files cached, but checked again (``no-cache``) on each use,
    so an upgrade's new script is never mixed with an old page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_revalidated(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [(b"cache-control", b"no-cache"), *message.get("headers", [])]
            await send(message)

        await self.app(scope, receive, send_revalidated)


Handler = Callable[[Request], Awaitable[Response]]


def create_app(
    settings: Settings,
    *,
    auth: AuthHook | None = None,
    read_only: bool = False,
    allowed_hosts: Iterable[str] = LOOPBACK_HOSTS,
) -> Starlette:
    """The web UI for ``settings``' Redis and namespace, as an ASGI app.

    ``auth`` is called on every request (see ``security.AuthHook``;
    ``basic_auth(settings)`` is one); ``read_only`` hides every action and
    refuses every POST with 403. Mount it anywhere:
    ``Mount("/jobs", app=create_app(settings, allowed_hosts=["jobs.example.com"]))``.

    ``allowed_hosts`` are the ``Host`` names the UI answers (any other is a 400,
    the defence against DNS rebinding): by default the loopback names
    (``localhost``, ``127.0.0.1``, ``::1``), so a UI mounted in an app served
    under another name must list it; ``*.example.com`` allows the subdomains,
    and ``["*"]`` turns the check off (for a host app that checks ``Host``
    itself, e.g. with Starlette's ``TrustedHostMiddleware``).
    """
    hosts = allowed_host_set(allowed_hosts)
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    filters.install(env)
    env.filters["segment"] = segment
    env.globals["short_ref"] = browsing.short_ref
    ui = UI(settings, read_only, env)
    shared = SharedRedis(settings)
    routes: list[BaseRoute] = [
        *views.routes(),
        *actions.routes(),
        Mount("/static", app=Revalidated(StaticFiles(directory=HERE / "static")), name="static"),
    ]

    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(Guard, auth=auth, read_only=read_only, allowed_hosts=hosts),
            Middleware(RedisForRequest, settings=settings, shared=shared),
        ],
        lifespan=shared_client_lifespan(settings, shared),
        exception_handlers={
            RedisConnectionError: outage,
            RedisTimeoutError: outage,
            BadParameter: bad_parameter,
            NoPermissionError: refused,
            Exception: server_error,
        },
    )
    app.state.ui = ui
    return app
