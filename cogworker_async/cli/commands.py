"""The ``cogworker-async`` command. Thin: parses, sets up logging and signals, calls the library.

User mistakes (a bad module, queue spec or Redis URL, an unreachable Redis)
are one ``error:`` line on stderr and a non-zero exit, never a traceback:
exit 2 for a usage mistake, 1 for a runtime failure. They are turned into
that line in two places only: ``run_redis`` for whatever Redis answers
(with the URL's password masked), and ``main`` for the rest (click's usage
errors included). Only a bug of ours still shows a traceback, after its
``error:`` line.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError
from redis.asyncio import Redis

from cogworker_async.cli import admin as cli_admin
from cogworker_async.cli import batches as batches_cli
from cogworker_async.cli import jobs as cli_jobs
from cogworker_async.cli import limits as limits_cli
from cogworker_async.cli import locks as locks_cli
from cogworker_async.cli import periodic as periodic_cli
from cogworker_async.cli import queues as cli_queues
from cogworker_async.cli import web as cli_web
from cogworker_async.cli import worker as cli_worker
from cogworker_async.cli.errors import fail, redis_failure, report
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect

# No pretty (rich) tracebacks: ``main`` turns every user mistake into one line,
# and a bug's plain traceback must not print the settings' locals (the password).
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="cogworker-async: Redis jobs.",
    pretty_exceptions_enable=False,
)
T = TypeVar("T")


# Settings fields set by a CLI option of the same meaning: a bad value names the option.
_OPTION_OF = {
    "redis_url": "--redis-url",
    "namespace": "--namespace",
    "concurrency": "--concurrency",
    "queues": "--queue",
    "shutdown_timeout": "--timeout",
}


def build_settings(**overrides: Any) -> Settings:
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            field = ".".join(str(p) for p in e["loc"])
            if field in given and field in _OPTION_OF:
                where = _OPTION_OF[field]
            elif field:
                where = f"{field} (COGWORKER_{field.upper()})"
            else:
                where = "settings"
            problems.append(f"{where}: {e['msg'].removeprefix('Value error, ')}")
        raise fail(f"bad settings: {'; '.join(problems)}") from None
    except SettingsError as exc:
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        raise fail(f"bad settings in the environment: {exc}{cause}") from None


def run_redis(settings: Settings, action: Callable[[Redis, Keys], Awaitable[T]]) -> T:
    # The library's warnings about bad data (a key of the wrong type, an entry
    # left in place) are one line each on stderr; the worker sets up its own.
    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s", stream=sys.stderr)

    async def main() -> T:
        redis = connect(settings)
        try:
            return await action(redis, Keys(settings.namespace))
        finally:
            await redis.aclose()

    try:
        return asyncio.run(main())
    except Exception as exc:
        message = redis_failure(exc, settings)
        if message is None:
            raise
        raise fail(message, 1) from None


# ``worker`` (and ``check``) first: the command most people come for.
cli_worker.register(app, build_settings=build_settings, run=run_redis, fail=fail)


cli_jobs.register(app, build_settings=build_settings, run=run_redis, fail=fail)
cli_queues.register(app, build_settings=build_settings, run=run_redis, fail=fail)


def _run_admin(
    redis_url: str | None, namespace: str | None, action: Callable[[Redis, Keys], Awaitable[T]]
) -> T:
    return run_redis(build_settings(redis_url=redis_url, namespace=namespace), action)


cli_admin.register(app, run=_run_admin, fail=fail)
periodic_cli.register(app, run=_run_admin, fail=fail)
cli_web.register(app, build_settings=build_settings, fail=fail)
locks_cli.register(app, run=_run_admin, fail=fail)
limits_cli.register(app, run=_run_admin, fail=fail)
batches_cli.register(app, run=_run_admin, fail=fail)


def _version(value: bool) -> None:
    if value:
        # The package's one version (pyproject.toml reads it from there too).
        from cogworker_async._version import __version__ as version

        typer.echo(f"cogworker-async {version}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_version, help="Print the version"),
    ] = False,
) -> None:
    """cogworker-async: Redis jobs."""


def run_cli(argv: list[str] | None = None) -> int:
    """Run the command line; every way out is an exit code, user mistakes one ``error:`` line."""
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="cogworker-async", standalone_mode=False)
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place every failure becomes an exit code
        return report(exc)
    return result if isinstance(result, int) else 0


def main() -> None:
    sys.exit(run_cli())
