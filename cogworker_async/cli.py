"""The ``cogworker-async`` command. Thin: parses, sets up logging and signals, calls the library.

User mistakes (a bad module, queue spec or Redis URL, an unreachable Redis)
are one clear line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError
from redis.asyncio import Redis

from cogworker_async import api, cli_admin, cli_worker
from cogworker_async.client import Client
from cogworker_async.jobs import JobOptions
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect
from cogworker_async.store.faults import is_outage

app = typer.Typer(add_completion=False, no_args_is_help=True, help="cogworker-async: Redis jobs.")
T = TypeVar("T")

RedisUrl = Annotated[
    str | None, typer.Option("--redis-url", help="Redis URL (COGWORKER_REDIS_URL)")
]
Namespace = Annotated[
    str | None, typer.Option("--namespace", help="Key namespace (COGWORKER_NAMESPACE)")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON")]


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def build_settings(**overrides: Any) -> Settings:
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise fail(f"bad settings: {problems}") from None
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
        if is_outage(exc):
            raise fail(f"cannot reach Redis at {settings.redis_url}: {exc}", 1) from None
        raise


# ``worker`` (and ``check``) first: the command most people come for.
cli_worker.register(app, build_settings=build_settings, run=run_redis, fail=fail)


@app.command()
def enqueue(
    name: Annotated[str, typer.Argument(help="Registered job name")],
    args: Annotated[list[str] | None, typer.Argument(help="Arguments, each as JSON")] = None,
    queue: Annotated[str, typer.Option("--queue")] = "default",
    delay: Annotated[float | None, typer.Option("--in", help="Run in SECONDS")] = None,
    redis_url: RedisUrl = None,
    namespace: Namespace = None,
) -> None:
    """Enqueue job NAME with JSON arguments; prints its jid."""
    parsed: list[Any] = []
    for index, text in enumerate(args or []):
        try:
            parsed.append(json.loads(text))
        except json.JSONDecodeError as exc:
            raise fail(f"argument {index} is not JSON ({exc.msg}): {text!r}") from None
    settings = build_settings(redis_url=redis_url, namespace=namespace)
    from cogworker_async.jobs import BoundJob, JobFunction

    target = BoundJob(JobFunction(lambda: None, name, JobOptions()), JobOptions(queue, delay=delay))

    async def action(redis: Redis, keys: Keys) -> str | None:
        client = Client(settings, redis=redis)
        return await client.enqueue(target, *parsed)

    typer.echo(run_redis(settings, action))


@app.command()
def stats(
    json_out: JsonFlag = False, redis_url: RedisUrl = None, namespace: Namespace = None
) -> None:
    """Processed, failed, per-queue size and latency, scheduled, retry, dead, processes."""
    settings = build_settings(redis_url=redis_url, namespace=namespace)
    result = run_redis(settings, api.stats)
    if json_out:
        typer.echo(json.dumps(result.as_dict(), indent=2))
        return
    typer.echo(f"processed  {result.processed}")
    typer.echo(f"failed     {result.failed}")
    typer.echo(f"scheduled  {result.scheduled}")
    typer.echo(f"retry      {result.retry}")
    typer.echo(f"dead       {result.dead}")
    typer.echo(f"processes  {result.processes}")
    typer.echo("recovery   " + "  ".join(f"{k} {v}" for k, v in result.recovery.items()))
    for q in result.queues:
        paused = "  (paused)" if q.paused else ""
        typer.echo(f"queue {q.name:<20} size {q.size:<8} latency {q.latency:.3f}s{paused}")


@app.command()
def queues(
    json_out: JsonFlag = False, redis_url: RedisUrl = None, namespace: Namespace = None
) -> None:
    """Every known queue with its size, latency and paused flag."""
    settings = build_settings(redis_url=redis_url, namespace=namespace)
    result = run_redis(settings, api.queues)
    if json_out:
        typer.echo(json.dumps([asdict(q) for q in result]))
        return
    for q in result:
        typer.echo(f"{q.name}\t{q.size}\t{q.latency:.3f}\t{'paused' if q.paused else ''}")


def _queue_action(
    action: Callable[[Redis, Keys, str], Coroutine[Any, Any, bool]],
) -> Callable[..., None]:
    def command(
        queue: Annotated[str, typer.Argument()],
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        settings = build_settings(redis_url=redis_url, namespace=namespace)
        if not run_redis(settings, lambda redis, keys: action(redis, keys, queue)):
            raise fail(f"could not {action.__name__} {queue} (see the warning above)", 1)
        typer.echo(f"{action.__name__}d {queue}")

    command.__doc__ = f"{action.__name__.capitalize()} fetching from QUEUE."
    return command


app.command("pause")(_queue_action(api.pause))
app.command("resume")(_queue_action(api.resume))


@app.command()
def clear(
    queue: Annotated[str, typer.Argument()],
    redis_url: RedisUrl = None,
    namespace: Namespace = None,
) -> None:
    """Delete every job waiting on QUEUE (it stays listed, and paused if it was)."""
    settings = build_settings(redis_url=redis_url, namespace=namespace)
    removed = run_redis(settings, lambda redis, keys: api.clear_queue(redis, keys, queue))
    typer.echo(f"cleared {removed} job(s) from {queue}")


def _signal_command(name: str, doc: str) -> Callable[..., None]:
    def command(
        identity: Annotated[str, typer.Argument(help="Process identity (see `processes`)")],
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        settings = build_settings(redis_url=redis_url, namespace=namespace)
        sent = run_redis(settings, lambda r, k: api.send_signal(r, k, identity, name))
        if not sent:
            raise fail(f"no live process {identity!r} (see `cogworker-async processes`)", 1)
        typer.echo(f"sent {name} to {identity} (acted on at its next beat)")

    command.__doc__ = doc
    return command


app.command("quiet")(_signal_command("quiet", "Tell process IDENTITY to stop fetching."))
app.command("stop")(_signal_command("stop", "Tell process IDENTITY to shut down gracefully."))


def _run_admin(
    redis_url: str | None, namespace: str | None, action: Callable[[Redis, Keys], Awaitable[T]]
) -> T:
    return run_redis(build_settings(redis_url=redis_url, namespace=namespace), action)


cli_admin.register(app, run=_run_admin, fail=fail)


def main() -> None:
    app()
