"""The ``web`` command: the web UI under uvicorn (needs the ``web`` extra)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Annotated, Any

import typer

Fail = Callable[..., typer.Exit]


def register(app: typer.Typer, *, build_settings: Callable[..., Any], fail: Fail) -> None:
    @app.command("web")
    def web(
        host: Annotated[str, typer.Option("--host", help="Interface to listen on")] = "127.0.0.1",
        port: Annotated[
            int,
            typer.Option("--port", min=0, max=65535, help="Port to listen on (0: any free one)"),
        ] = 8000,
        root_path: Annotated[
            str,
            typer.Option("--root-path", help="The prefix a reverse proxy serves it under (/jobs)"),
        ] = "",
        read_only: Annotated[
            bool, typer.Option("--read-only", help="Show everything, change nothing")
        ] = False,
        redis_url: Annotated[
            str | None, typer.Option("--redis-url", help="Redis URL (COGWORKER_REDIS_URL)")
        ] = None,
        namespace: Annotated[
            str | None, typer.Option("--namespace", help="Key namespace (COGWORKER_NAMESPACE)")
        ] = None,
        allowed_host: Annotated[
            list[str] | None,
            typer.Option(
                "--allowed-host",
                help="A Host name the UI answers (repeatable; *.domain for subdomains, "
                "* for any). Default: the names --host is reached by (loopback: "
                "localhost, 127.0.0.1, ::1); any other Host is refused (DNS rebinding)",
            ),
        ] = None,
    ) -> None:
        """The web UI (basic auth when COGWORKER_WEB_AUTH is user:password)."""
        settings = build_settings(redis_url=redis_url, namespace=namespace)
        try:
            import uvicorn

            from cogworker_async.web import basic_auth, create_app
            from cogworker_async.web.security import allowed_host_set, hosts_for_bind
        except ImportError as exc:
            raise fail(
                f"the web UI needs the web extra ({exc.name} is missing): "
                "pip install 'cogworker-async[web]'"
            ) from None
        auth = basic_auth(settings) if settings.web_auth is not None else None
        if auth is None and host not in ("127.0.0.1", "localhost", "::1"):
            typer.echo(
                f"warning: serving on {host} without auth: set COGWORKER_WEB_AUTH=user:password",
                err=True,
            )
        hosts = allowed_host or list(hosts_for_bind(host))
        try:
            allowed_host_set(hosts)
        except ValueError as exc:
            raise fail(str(exc)) from None
        if not allowed_host:
            typer.echo(
                f"answering Host {', '.join(hosts)} (--allowed-host NAME for another)", err=True
            )
        taken = port_taken(host, port)
        if taken is not None:
            raise fail(
                f"cannot listen on {host}:{port} ({taken}): is your app there? "
                f"Give the UI another port: --port {port + 1 if port < 65535 else 8001}"
            )
        uvicorn.run(
            create_app(settings, auth=auth, read_only=read_only, allowed_hosts=hosts),
            host=host,
            port=port,
            root_path=root_path,
            log_level="info",
        )


def port_taken(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on (in use, say), or None: asked before
    uvicorn starts, so the answer is one line naming ``--port``, not a server that
    starts up and shuts down again. Port 0 (any free one) is never taken."""
    if port == 0:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # uvicorn's choice
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
            probe.bind((host, port))
    except OSError as exc:
        return exc.strerror or str(exc)
    return None
