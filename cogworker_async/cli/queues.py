"""The namespace's commands: ``stats``, ``queues``, ``pause``/``resume``/``clear`` a
queue, and ``quiet``/``stop`` a process."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from typing import Annotated, Any

import typer
from redis.asyncio import Redis

from cogworker_async import api
from cogworker_async.cli import admin as cli_admin
from cogworker_async.cli import history as cli_history
from cogworker_async.cli.admin import JsonFlag, Namespace, RedisUrl
from cogworker_async.cli.worker import Fail, RedisRunner
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings, check_queue_name


def check_queue(queue: str, fail: Fail) -> None:
    """The client's rule: no worker could ever read a queue its -q refuses."""
    try:
        check_queue_name(queue)
    except ValueError as exc:
        raise fail(str(exc)) from None


def register(
    app: typer.Typer, *, build_settings: Callable[..., Settings], run: RedisRunner, fail: Fail
) -> None:
    """Add ``stats``, ``queues``, ``pause``, ``resume``, ``clear``, ``quiet`` and ``stop``."""

    @app.command()
    def stats(
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
        history: Annotated[
            bool,
            typer.Option("--history", help="The metrics history instead: per day, minute, job"),
        ] = False,
        minutes: Annotated[
            int, typer.Option("--minutes", min=0, max=api.MAX_MINUTES, help="Minutes of history")
        ] = 60,
        days: Annotated[
            int, typer.Option("--days", min=0, max=api.MAX_DAYS, help="Days of history")
        ] = 30,
    ) -> None:
        """Processed, failed, per-queue size and latency, scheduled, retry, dead, processes."""
        settings = build_settings(redis_url=redis_url, namespace=namespace)
        if history:

            async def read(redis: Redis, keys: Keys) -> api.History:
                return await api.history(redis, keys, minutes=minutes, days=days)

            cli_history.print_history(run(settings, read), json_out=json_out)
            return
        if json_out:
            # The counters, and with them the metrics history (per day; per minute
            # and per job only where `metrics_history` wrote it).
            async def read_all(redis: Redis, keys: Keys) -> dict[str, object]:
                counters = (await api.stats(redis, keys)).as_dict()
                counters["history"] = (
                    await api.history(redis, keys, minutes=minutes, days=days)
                ).as_dict()
                return counters

            typer.echo(json.dumps(run(settings, read_all), indent=2))
            return
        result = run(settings, api.stats)
        typer.echo(f"processed  {result.processed}")
        typer.echo(f"failed     {result.failed}")
        typer.echo(f"scheduled  {result.scheduled}")
        typer.echo(f"retry      {result.retry}")
        typer.echo(f"dead       {result.dead}")
        typer.echo(f"aborted    {result.aborted}")
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
        result = run(settings, api.queues)
        if json_out:
            typer.echo(json.dumps([asdict(q) for q in result]))
            return
        rows = [
            [q.name, str(q.size), f"{q.latency:.3f}s", "paused" if q.paused else ""] for q in result
        ]
        if not rows:
            typer.echo("(none)")
            return
        for line in cli_admin.table(["QUEUE", "SIZE", "LATENCY", "PAUSED"], rows, right={1, 2}):
            typer.echo(line)

    def _queue_action(
        action: Callable[..., Coroutine[Any, Any, bool]],
    ) -> Callable[..., None]:
        verb = action.__name__

        def command(
            queue: Annotated[str, typer.Argument(help="The queue's name (see `queues`)")],
            force: Annotated[
                bool, typer.Option("--force", help="Even a queue nothing knows (not a typo)")
            ] = False,
            redis_url: RedisUrl = None,
            namespace: Namespace = None,
        ) -> None:
            check_queue(queue, fail)
            settings = build_settings(redis_url=redis_url, namespace=namespace)

            async def act(redis: Redis, keys: Keys) -> bool:
                try:
                    return bool(await action(redis, keys, queue, force=force))
                except api.UnknownQueueError as exc:
                    raise fail(str(exc).replace(" (force=True)", "")) from None

            if not run(settings, act):
                raise fail(f"could not {verb} {queue} (see the warning above)", 1)
            typer.echo(f"{verb}d {queue}")

        command.__doc__ = (
            f"{verb.capitalize()} fetching from QUEUE "
            "(one neither listed nor read by a live process only with --force)."
        )
        return command

    app.command("pause")(_queue_action(api.pause))
    app.command("resume")(_queue_action(api.resume))

    @app.command()
    def clear(
        queue: Annotated[str, typer.Argument(help="The queue to empty")],
        yes: Annotated[bool, typer.Option("--yes", help="Do not ask")] = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Delete every job waiting on QUEUE or held of it by a limit (it stays listed, and
        paused if it was); asks first."""
        if queue is not None:
            check_queue(queue, fail)
        settings = build_settings(redis_url=redis_url, namespace=namespace)
        cli_admin.confirm(f"delete every job waiting on {queue}", yes=yes, fail=fail)
        removed = run(settings, lambda redis, keys: api.clear_queue(redis, keys, queue))
        typer.echo(f"cleared {removed} job(s) from {queue}")

    def _signal_command(name: str, doc: str) -> Callable[..., None]:
        def command(
            identity: Annotated[str, typer.Argument(help="Process identity (see `processes`)")],
            redis_url: RedisUrl = None,
            namespace: Namespace = None,
        ) -> None:
            settings = build_settings(redis_url=redis_url, namespace=namespace)
            sent = run(settings, lambda r, k: api.send_signal(r, k, identity, name))
            if not sent:
                raise fail(f"no live process {identity!r} (see `cogworker-async processes`)", 1)
            typer.echo(f"sent {name} to {identity} (acted on at its next beat)")

        command.__doc__ = doc
        return command

    app.command("quiet")(_signal_command("quiet", "Tell process IDENTITY to stop fetching."))
    app.command("stop")(_signal_command("stop", "Tell process IDENTITY to shut down gracefully."))
