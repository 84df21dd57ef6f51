"""What every page handler needs from its request: the app's ``UI``, the Redis
client, a rendered template, a redirect that carries a signed note, the POSTed form.

The views and the actions import these; ``app`` builds the app around them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from jinja2 import Environment
from redis.asyncio import Redis
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.web.minute_cache import MinuteCache

MAX_FORM_BYTES = 1 << 20
NOTE_CLIP = 300
"""A note is one line: the names in it are clipped to keep it one (and the redirect short)."""

NAV = (
    ("dashboard", "/", "Dashboard"),
    ("busy", "/busy", "Busy"),
    ("queues", "/queues", "Queues"),
    ("schedule", "/scheduled", "Scheduled"),
    ("retry", "/retries", "Retries"),
    ("dead", "/dead", "Dead"),
    ("periodic", "/periodic", "Periodic"),
    ("locks", "/locks", "Locks"),
    ("limits", "/limits", "Limits"),
    ("batches", "/batches", "Batches"),
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
    minutes: MinuteCache = field(init=False, default_factory=MinuteCache)
    # Signs the notes this app writes; made per app, so a note survives only
    # within the process that wrote it (one signed by another is not shown).
    note_key: bytes = field(init=False, repr=False, default_factory=lambda: secrets.token_bytes(32))

    def __post_init__(self) -> None:
        self.keys = Keys(self.settings.namespace)

    def sign(self, note: str) -> str:
        return hmac.new(self.note_key, note.encode(), hashlib.sha256).hexdigest()[:32]


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


def segment(name: Any) -> str:
    """``name`` as one path segment: every ``/``, ``?``, ``#`` and ``%`` encoded, so a
    queue named ``../queues/victim`` links to itself, never to ``victim``."""
    return quote(str(name), safe="")


def note_of(request: Request) -> str | None:
    """The note this app wrote into the redirect (``back``), or None: an unsigned or
    forged ``?note=`` is content spoofing, not a message."""
    note = request.query_params.get("note")
    signature = request.query_params.get("sig", "")
    if not note or not hmac.compare_digest(ui_of(request).sign(note), signature):
        return None
    return note


def render(request: Request, template: str, *, status_code: int = 200, **context: Any) -> Response:
    ui = ui_of(request)
    html = ui.env.get_template(template).render(
        request=request,
        read_only=ui.read_only,
        namespace=ui.settings.namespace,
        nav=NAV,
        note=note_of(request),
        url=lambda path, **q: url(request, path, **q),
        **context,
    )
    return HTMLResponse(html, status_code=status_code)


def back(request: Request, path: str, note: str, **query: Any) -> Response:
    """After a POST: see the page again (303), with a signed note of what was done."""
    if len(note) > NOTE_CLIP:
        note = note[:NOTE_CLIP] + "…"
    signed = url(request, path, note=note, sig=ui_of(request).sign(note), **query)
    return RedirectResponse(signed, status_code=303)


async def form(request: Request) -> dict[str, list[str]]:
    """The POSTed form (urlencoded), each field's values in order."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return {}
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


def first(fields: dict[str, list[str]], name: str, default: str = "") -> str:
    values = fields.get(name)
    return values[0] if values else default
