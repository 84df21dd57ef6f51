"""``create_app``: the web UI as one ASGI app, mountable under any prefix.

Every page is a GET that only reads; every change is a POST that passes the
``Guard`` (auth, read-only, cross-site) before a handler sees it. Each request
gets its own Redis client, closed when it is answered, so the app works
mounted inside another app (whose lifespan never reaches a mounted app) and
holds nothing between requests.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect
from cogworker_async.web import filters
from cogworker_async.web.security import AuthHook, Guard

HERE = Path(__file__).resolve().parent
MAX_FORM_BYTES = 1 << 20

NAV = (
    ("dashboard", "/", "Dashboard"),
    ("busy", "/busy", "Busy"),
    ("queues", "/queues", "Queues"),
    ("schedule", "/scheduled", "Scheduled"),
    ("retry", "/retries", "Retries"),
    ("dead", "/dead", "Dead"),
    ("periodic", "/periodic", "Periodic"),
    ("locks", "/locks", "Locks"),
    ("quarantine", "/quarantine", "Quarantine"),
    ("metrics", "/metrics", "Metrics"),
)
"""The pages in the navigation bar; a page added later adds a row here."""


@dataclass
class UI:
    """What every handler needs: settings, keys, templates, the read-only flag."""

    settings: Settings
    read_only: bool
    env: Environment
    keys: Keys = field(init=False)

    def __post_init__(self) -> None:
        self.keys = Keys(self.settings.namespace)


class RedisPerRequest:
    """ASGI middleware: a Redis client for each request, closed when it is answered.

    One connection a request costs a connect (well under a millisecond on a
    LAN) and holds nothing between requests: no pool tied to an event loop,
    nothing left open when the app is mounted in a host whose lifespan never
    reaches it.
    """

    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        client = connect(self.settings, max_connections=4)
        scope.setdefault("state", {})["redis"] = client

        async def send_timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                # The app's own time, for the browser's network panel and the benchmark.
                spent = (time.perf_counter() - started) * 1000
                timing = (b"server-timing", f"app;dur={spent:.1f}".encode())
                message["headers"] = [*message.get("headers", []), timing]
            await send(message)

        try:
            await self.app(scope, receive, send_timed)
        finally:
            await client.aclose()


def redis_of(request: Request) -> Redis:
    client: Redis = request.state.redis
    return client


def ui_of(request: Request) -> UI:
    ui: UI = request.app.state.ui
    return ui


def url(request: Request, path: str, **query: Any) -> str:
    """``path`` under the prefix this app is mounted at, with ``query`` (None values left out)."""
    full = request.scope.get("root_path", "") + path
    given = {k: v for k, v in query.items() if v is not None and v != ""}
    return f"{full}?{urlencode(given)}" if given else full


def render(request: Request, template: str, *, status_code: int = 200, **context: Any) -> Response:
    ui = ui_of(request)
    html = ui.env.get_template(template).render(
        request=request,
        read_only=ui.read_only,
        namespace=ui.settings.namespace,
        nav=NAV,
        note=request.query_params.get("note"),
        url=lambda path, **q: url(request, path, **q),
        **context,
    )
    return HTMLResponse(html, status_code=status_code)


def back(request: Request, path: str, note: str, **query: Any) -> Response:
    """After a POST: see the page again (303), with a note of what was done."""
    return RedirectResponse(url(request, path, note=note, **query), status_code=303)


async def form(request: Request) -> dict[str, list[str]]:
    """The POSTed form (urlencoded), each field's values in order."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return {}
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


def first(fields: dict[str, list[str]], name: str, default: str = "") -> str:
    values = fields.get(name)
    return values[0] if values else default


async def outage(request: Request, exc: Exception) -> Response:
    return render(request, "outage.html", status_code=503, problem=str(exc) or type(exc).__name__)


Handler = Callable[[Request], Awaitable[Response]]


def create_app(
    settings: Settings, *, auth: AuthHook | None = None, read_only: bool = False
) -> Starlette:
    """The web UI for ``settings``' Redis and namespace, as an ASGI app.

    ``auth`` is called on every request (see ``security.AuthHook``;
    ``basic_auth(settings)`` is one); ``read_only`` hides every action and
    refuses every POST with 403. Mount it anywhere:
    ``Mount("/jobs", app=create_app(settings))``.
    """
    from cogworker_async.web import actions, views

    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    filters.install(env)
    ui = UI(settings, read_only, env)
    routes: list[BaseRoute] = [
        *views.routes(),
        *actions.routes(),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]

    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(Guard, auth=auth, read_only=read_only),
            Middleware(RedisPerRequest, settings=settings),
        ],
        exception_handlers={
            RedisConnectionError: outage,
            RedisTimeoutError: outage,
        },
    )
    app.state.ui = ui
    return app
