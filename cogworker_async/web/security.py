"""What guards every request: the auth hook, cross-site refusal, read-only, headers.

The invariant: no request from another site, no request the ``auth`` hook
refused and no request to a read-only app changes anything. State changes are
POSTs only (a GET never writes), and every POST passes ``Guard`` first.

Cross-site: a browser names where a request came from in ``Sec-Fetch-Site``
(every current browser) and ``Origin`` (every browser on a POST); one saying
"another site" is a 403 (``cross_site``). A request with neither comes from
no browser (curl, a script) and so cannot be a forged cross-site request.

Rebinding: a page on ``rebind.evil.example`` whose name the attacker then
points at 127.0.0.1 is, to the browser, same-origin with this app, so the
cross-site rule cannot see it; only the ``Host`` it sends gives it away. Every
request whose ``Host`` is not one of the allowed names is a 400
(``host_refusal``): by default the loopback names, which is what the app is
reached by when it listens on a loopback interface.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import inspect
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cogworker_async.settings import Settings

AuthResult = bool | Response
AuthHook = Callable[[Request], AuthResult | Awaitable[AuthResult]]
"""Called on every request: True lets it through; False answers 403; a Response is sent as is."""

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SAME_SITE = frozenset({"same-origin", "none"})

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "x-content-type-options": "nosniff",
    # Pages show job arguments and errors: no shared cache or back-forward
    # copy keeps them (static files say otherwise for themselves).
    "cache-control": "private, no-store",
}

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
"""The names a browser on this machine reaches a loopback-bound server by:
``create_app``'s default ``allowed_hosts``."""
ANY_HOST = "*"
WILDCARD_BINDS = ("0.0.0.0", "::", "")  # noqa: S104 - names a bind, binds nothing


def hosts_for_bind(bind: str) -> tuple[str, ...]:
    """The ``Host`` names a server listening on ``bind`` is reached by, as far as it knows.

    A loopback address: the loopback names. Every interface (``0.0.0.0``, ``::``):
    those and this machine's own names (the names the network knows it by
    beyond these are for ``--allowed-host`` to add). One address or name: itself.
    """
    name = bind.strip().lower().removeprefix("[").removesuffix("]")
    if name in LOOPBACK_HOSTS or name.startswith("127."):
        return LOOPBACK_HOSTS
    if name in WILDCARD_BINDS:
        own = {socket.gethostname().lower(), socket.getfqdn().lower()} - {""}
        return (*LOOPBACK_HOSTS, *sorted(own))
    return (name,)


def allowed_host_set(hosts: Iterable[str]) -> frozenset[str]:
    """``hosts`` as the Guard compares them: lower case, IPv6 without brackets.

    A name is matched exactly; ``*.example.com`` matches its subdomains (not
    ``example.com`` itself); ``*`` alone turns the check off. A ValueError
    names a pattern with a ``*`` anywhere else.
    """
    found: set[str] = set()
    for given in hosts:
        host = given.strip().lower().removeprefix("[").removesuffix("]")
        wildcard = host == ANY_HOST or (host.startswith("*.") and "*" not in host[1:])
        if not host or ("*" in host and not wildcard):
            raise ValueError(f"bad allowed host {given!r}: a name, an address, *.domain or *")
        found.add(host)
    return frozenset(found)


def host_of(header: str) -> str:
    """The host name of a ``Host`` header, lower case, without port or IPv6 brackets."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def host_refusal(request: Request, allowed: frozenset[str]) -> str | None:
    """Why this request's ``Host`` is not one the app serves, or None when it is."""
    if ANY_HOST in allowed:
        return None
    header = request.headers.get("host", "")
    host = host_of(header)
    if host in allowed or any(p.startswith("*.") and host.endswith(p[1:]) for p in allowed):
        return None
    return (
        f"host {header[:200]!r} is not served here: allow it with "
        "`cogworker-async web --allowed-host NAME` or create_app(allowed_hosts=[...])"
    )


def cross_site(request: Request) -> str | None:
    """Why this request is from another site, or None when it is not.

    ``Sec-Fetch-Site``, when sent, decides alone: the browser computed it, and
    it stays right behind a proxy that rewrites the scheme or the host. Only a
    browser too old to send it is judged by ``Origin`` against the host it
    asked for (``X-Forwarded-Host`` or ``Host``; the scheme is not compared,
    since a TLS-terminating proxy hands us plain HTTP).
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return None if fetch_site in SAME_SITE else f"Sec-Fetch-Site is {fetch_site}"
    origin = request.headers.get("origin")
    if origin is None:
        return None
    host = request.headers.get("x-forwarded-host") or request.headers.get("host", "")
    if urlsplit(origin).netloc.lower() != host.split(",")[0].strip().lower():
        return f"Origin {origin} is not this host ({host})"
    return None


def basic_auth(settings: Settings, *, realm: str = "cogworker") -> AuthHook:
    """An ``auth`` hook asking for HTTP basic auth against ``settings.web_auth``.

    ``web_auth`` (``COGWORKER_WEB_AUTH``) is ``user:password``. Use it over
    HTTPS only: basic auth sends the password with every request. Without the
    setting every request is refused, never let through.
    """
    secret = settings.web_auth.get_secret_value() if settings.web_auth is not None else None
    expected = secret.encode() if secret and ":" in secret else None
    challenge = {"www-authenticate": f'Basic realm="{realm}", charset="UTF-8"'}

    def check(request: Request) -> AuthResult:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        given = b""
        if scheme.lower() == "basic":
            try:
                given = base64.b64decode(value.strip(), validate=True)
            except (binascii.Error, ValueError):
                given = b""
        if expected is not None and given and hmac.compare_digest(given, expected):
            return True
        return PlainTextResponse("authentication required", status_code=401, headers=challenge)

    return check


def with_security_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` and each of ``HEADERS`` they do not set themselves."""
    given = list(headers)
    present = {bytes(k).lower() for k, _ in given}
    extra = [(k.encode(), v.encode()) for k, v in HEADERS.items() if k.encode() not in present]
    return [*given, *extra]


class Guard:
    """ASGI middleware: security headers on every answer, then auth, then the POST rules."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        auth: AuthHook | None,
        read_only: bool,
        allowed_hosts: frozenset[str],
    ) -> None:
        self.app = app
        self.auth = auth
        self.read_only = read_only
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = with_security_headers(message.get("headers", []))
            await send(message)

        request = Request(scope, receive)
        refusal = await self._refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    async def _refusal(self, request: Request) -> Response | None:
        wrong_host = host_refusal(request, self.allowed_hosts)
        if wrong_host is not None:  # before auth: a rebinding page gets no challenge either
            return PlainTextResponse(wrong_host, status_code=400)
        if self.auth is not None:
            verdict: Any = self.auth(request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if isinstance(verdict, Response):
                return verdict
            if verdict is not True:
                return PlainTextResponse("forbidden", status_code=403)
        if request.method in SAFE_METHODS:
            return None
        if self.read_only:
            return PlainTextResponse("read-only: no changes here", status_code=403)
        why = cross_site(request)
        if why is not None:
            return PlainTextResponse(f"cross-site request refused ({why})", status_code=403)
        return None
