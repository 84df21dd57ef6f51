"""The ``worker`` and ``check`` commands: run a worker process, and ask whether one runs here.

``cli.py`` hands in how to build settings, reach Redis and fail with one line
(``register``), so this module never imports it back. The optional extras
(``--metrics-port``, ``--otel``) are imported only when asked for, and a
missing one is one clear line, not a traceback.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import socket
import sys
from collections.abc import Awaitable, Callable
from enum import StrEnum
from types import ModuleType
from typing import Annotated, Any, Protocol, TypeVar

import typer
from redis.asyncio import Redis

from cogworker_async import api
from cogworker_async.cli.user_code import find_lifespan, find_periodic, import_job_modules
from cogworker_async.cli.waiting import wait_for_redis
from cogworker_async.errors import CogworkerError
from cogworker_async.keys import Keys
from cogworker_async.middleware import ServerMiddleware
from cogworker_async.observability import logfmt
from cogworker_async.settings import Settings, parse_queue_spec

T = TypeVar("T")

RedisUrl = Annotated[
    str | None, typer.Option("--redis-url", help="Redis URL (COGWORKER_REDIS_URL)")
]
Namespace = Annotated[
    str | None, typer.Option("--namespace", help="Key namespace (COGWORKER_NAMESPACE)")
]


class Fail(Protocol):
    def __call__(self, message: str, code: int = 2) -> typer.Exit: ...


class RedisRunner(Protocol):
    """Runs ``action`` against Redis; an unreachable Redis is one line and exit 1."""

    def __call__(self, settings: Settings, action: Callable[[Redis, Keys], Awaitable[T]]) -> T: ...


class LogFormat(StrEnum):
    text = "text"
    json = "json"


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - scraped from other hosts, like prometheus_client's server

# extra -> (module to import, the distribution it needs)
_EXTRAS = {
    "metrics": ("cogworker_async.observability.prometheus", "prometheus_client"),
    "otel": ("cogworker_async.observability.tracing", "opentelemetry"),
}


def setup_logging(level: str, log_format: str = "text") -> None:
    logging.basicConfig(
        level=logging.getLevelName(level.upper()), handlers=[logfmt.handler(log_format)]
    )


def child_argv(argv: list[str]) -> list[str]:
    """This command line minus --processes/--embedded-redis (the children share one Redis)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--processes":
            skip = True
            continue
        if arg.startswith("--processes=") or arg == "--embedded-redis":
            continue
        out.append(arg)
    return out


def register(
    app: typer.Typer, *, build_settings: Callable[..., Settings], run: RedisRunner, fail: Fail
) -> None:
    """Add ``worker`` and ``check`` to ``app``."""

    def optional(extra: str, flag: str) -> ModuleType:
        module, needs = _EXTRAS[extra]
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not (exc.name or "").startswith(needs):
                raise
            hint = f"pip install 'cogworker-async[{extra}]'"
            raise fail(f"{flag} needs the {extra} extra ({exc.name} is missing): {hint}") from None

    @app.command()
    def worker(
        modules: Annotated[
            list[str], typer.Argument(help="Python modules defining @job functions")
        ],
        queue: Annotated[
            list[str] | None, typer.Option("-q", "--queue", help="QUEUE[:WEIGHT], repeatable")
        ] = None,
        concurrency: Annotated[
            int | None,
            typer.Option(
                "-c", "--concurrency", help="Jobs run at once by each process (default 10)"
            ),
        ] = None,
        processes: Annotated[
            int,
            typer.Option(
                "--processes",
                min=1,
                help="Worker processes to fork under one supervisor (a dead child is replaced)",
            ),
        ] = 1,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
        timeout: Annotated[
            float | None, typer.Option("--timeout", help="Shutdown timeout (seconds)")
        ] = None,
        strict: Annotated[bool, typer.Option("--strict", help="Strict queue order")] = False,
        embedded_redis: Annotated[
            bool,
            typer.Option(
                "--embedded-redis",
                help="Start a throwaway redis-server at --redis-url's port (default 6379)",
            ),
        ] = False,
        log_level: Annotated[
            LogLevel,
            typer.Option("--log-level", case_sensitive=False, help="The least severe level logged"),
        ] = LogLevel.INFO,
        log_format: Annotated[
            LogFormat, typer.Option("--log-format", help="text, or json: one object a line")
        ] = LogFormat.text,
        metrics_port: Annotated[
            int | None,
            typer.Option(
                "--metrics-port",
                min=0,
                max=65535,
                help="Serve Prometheus /metrics and /healthz on PORT (the metrics extra)",
            ),
        ] = None,
        metrics_host: Annotated[
            str, typer.Option("--metrics-host", help="Address for --metrics-port")
        ] = ALL_INTERFACES,
        otel: Annotated[
            bool, typer.Option("--otel", help="Run each job in an OpenTelemetry span (otel extra)")
        ] = False,
        lifespan: Annotated[
            str | None,
            typer.Option(
                "--lifespan",
                help="module:attr of the worker's lifespan (default: a job module's "
                "worker_lifespan)",
            ),
        ] = None,
        periodic: Annotated[
            list[str] | None,
            typer.Option(
                "--periodic",
                help="module:attr of a list of periodic entries (every/cron), repeatable",
            ),
        ] = None,
        max_memory: Annotated[
            float | None,
            typer.Option(
                "--max-memory",
                min=1,
                help="With --processes: restart a child gracefully past this RSS (MiB)",
            ),
        ] = None,
    ) -> None:
        """Run a worker on MODULE... until SIGTERM/SIGINT (a second one stops faster)."""
        setup_logging(log_level.value, log_format.value)
        for spec in queue or []:
            try:
                parse_queue_spec(spec)
            except ValueError as exc:
                raise fail(str(exc)) from None
        if metrics_port is not None:
            if processes > 1:
                raise fail(
                    "--metrics-port serves one process: use it with --processes 1 "
                    "(one worker per port)"
                )
            optional("metrics", "--metrics-port")
        if otel:
            optional("otel", "--otel")
        settings = build_settings(
            redis_url=redis_url,
            namespace=namespace,
            concurrency=concurrency,
            queues=tuple(queue) if queue else None,
            shutdown_timeout=timeout,
            strict_order=strict or None,
        )
        embedded = None
        if embedded_redis:
            from cogworker_async.cli.embedded_redis import EmbeddedRedisRefused, start_embedded

            # At the address the settings name (default localhost:6379), so a client
            # with the same settings finds it, and never another Redis.
            try:
                embedded, url = start_embedded(settings.redis_url)
            except EmbeddedRedisRefused as exc:
                raise fail(str(exc), exc.code) from None
            os.environ["COGWORKER_REDIS_URL"] = url  # for --processes' children
            settings = settings.model_copy(update={"redis_url": url})
            typer.echo(f"COGWORKER_REDIS_URL={url}")  # stdout: ready to `export`
            typer.echo(f"embedded Redis at {url}", err=True)
        try:
            if processes > 1:
                from cogworker_async.swarm import run_swarm

                argv = child_argv(sys.argv[1:])
                raise typer.Exit(
                    run_swarm(processes, argv, settings.shutdown_timeout, max_rss_mb=max_memory)
                )
            run_worker(
                settings, modules, metrics_port, metrics_host, otel, lifespan, periodic or []
            )
        finally:
            if embedded is not None:
                embedded.stop()

    def run_worker(
        settings: Settings,
        modules: list[str],
        metrics_port: int | None,
        metrics_host: str,
        otel: bool,
        lifespan_spec: str | None,
        periodic_specs: list[str],
    ) -> None:
        from cogworker_async.worker.signals import stop_on_signals
        from cogworker_async.worker.worker import Worker

        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # so `worker examples.tasks` imports from here
        if (problem := import_job_modules(modules)) is not None:
            raise fail(problem)
        lifespan, problem = find_lifespan(lifespan_spec, modules)
        if problem is not None:
            raise fail(problem)
        entries, problem = find_periodic(periodic_specs)
        if problem is not None:
            raise fail(problem)
        middleware: list[ServerMiddleware] = []
        if otel:
            tracing = optional("otel", "--otel")
            middleware.append(tracing.Tracing().server_middleware)
        metrics: Any = None
        if metrics_port is not None:
            from prometheus_client import REGISTRY

            # The global registry: the process, platform and GC collectors come along.
            metrics = optional("metrics", "--metrics-port").Metrics(settings, registry=REGISTRY)
            middleware.append(metrics.middleware)
        try:
            # Signals are handled here, around the Redis check and the run.
            instance = Worker(
                settings,
                jobs=modules,
                middleware=middleware,
                handle_signals=False,
                lifespan=lifespan,
                periodic=entries,
            )
        except (CogworkerError, ValueError) as exc:
            raise fail(str(exc)) from None
        instance.freeze_heap = True  # this process is the worker's own (worker/heap.py)
        # Redis answers (and takes the password) before anything is served:
        # a mistake here is one line from ``run``, not a worker log. A Redis not
        # up yet is waited for, as an embedded worker does; a signal meanwhile is exit 0.
        where = settings.masked_redis_url
        if not run(settings, lambda redis, _keys: wait_for_redis(redis, where, instance.log)):
            return
        if otel and not optional("otel", "--otel").has_tracer_provider():
            # Checked after the job modules are imported: one of them may set it.
            instance.log.warning(
                "--otel: no tracer provider is set, so spans go nowhere "
                "(run under opentelemetry-instrument, or set one in a job module)"
            )
        server = None
        if metrics is not None:
            metrics.watch(instance.log)
            try:
                server = metrics.serve(metrics_port, identity=instance.identity, host=metrics_host)
            except OSError as exc:
                metrics.close()
                message = f"cannot serve metrics on {metrics_host}:{metrics_port}: {exc}"
                raise fail(message, 1) from None
            instance.log.info(
                "metrics on http://%s:%d/metrics and /healthz", metrics_host, server.port
            )

        async def main() -> None:
            # Installed around the run, so a SIGTERM at any point is a clean stop.
            with stop_on_signals(instance.stop, instance.log):
                await instance.run()

        try:
            asyncio.run(main())
        except CogworkerError as exc:
            raise fail(str(exc), 1) from None
        finally:
            if server is not None:
                server.close()
            if metrics is not None:
                metrics.close()

    @app.command()
    def check(redis_url: RedisUrl = None, namespace: Namespace = None) -> None:
        """Exit 0 when Redis answers and a worker process on this host is alive, else 1."""
        settings = build_settings(redis_url=redis_url, namespace=namespace)
        found = run(settings, api.processes)
        host = socket.gethostname()
        here = [p for p in found if p.alive and p.hostname == host]
        if not here:
            elsewhere = sum(1 for p in found if p.alive)
            raise fail(f"no live worker process on {host} ({elsewhere} live on other hosts)", 1)
        typer.echo(f"ok: {len(here)} live worker process(es) on {host}")
