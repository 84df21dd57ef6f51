"""``cogworker-async periodic list|run-now|pause|resume``: thin, over ``api.periodic``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer
from redis.asyncio import Redis

from cogworker_async import api
from cogworker_async.cli.admin import JsonFlag, Namespace, RedisUrl, Runner
from cogworker_async.keys import Keys


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) + "Z"


def _result(record: dict[str, Any] | None) -> str:
    if not record:
        return "-"
    error = f" ({record['error']})" if record.get("error") else ""
    return f"{record.get('result', '?')}{error}"


def register(app: typer.Typer, *, run: Runner, fail: Callable[[str, int], typer.Exit]) -> None:
    periodic = typer.Typer(no_args_is_help=True, help="Periodic entries the workers run.")
    app.add_typer(periodic, name="periodic")

    @periodic.command("list")
    def periodic_list(
        json_out: JsonFlag = False, redis_url: RedisUrl = None, namespace: Namespace = None
    ) -> None:
        """Name, schedule, zone, next run, last run and last result of each published entry
        (marked paused when paused at run time)."""
        result = run(redis_url, namespace, api.periodic_entries)
        if json_out:
            typer.echo(json.dumps([e.as_dict() for e in result], indent=2))
            return
        for e in result:
            typer.echo(
                f"{e.name}{' (paused)' if e.paused else ''}\t{e.schedule}\t{e.tz}"
                f"\tnext {_when(e.next_run)}"
                f"\tlast {_when(e.last_run)}\tresult {_result(e.last_result)}"
                f"\t{e.job}@{e.queue}\tmisfire={e.misfire}"
                + ("" if e.overlap else f"\toverlap=False running={e.running or '-'}")
                + ("\tUNREAD: no live process reads this queue" if e.queue_read is False else "")
            )
        if not result:
            typer.echo("(none)")

    @periodic.command("run-now")
    def periodic_run_now(
        name: Annotated[str, typer.Argument(help="The entry's name")],
        force: Annotated[
            bool,
            typer.Option("--force", help="Enqueue even when no live process reads its queue"),
        ] = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Enqueue one run of entry NAME now (its schedule is unchanged). Refused when no
        live process reads the entry's queue, unless --force."""

        async def action(redis: Redis, keys: Keys) -> str | None:
            return await api.run_periodic_now(redis, keys, name, force=force)

        try:
            jid = run(redis_url, namespace, action)
        except ValueError as exc:  # an unreadable definition, or a queue nobody reads
            raise fail(str(exc), 1) from None
        if jid is None:
            raise fail(f"no periodic entry named {name!r} (see `periodic list`)", 1)
        typer.echo(jid)

    @periodic.command("pause")
    def periodic_pause(
        name: Annotated[str, typer.Argument(help="The entry's name (see `periodic list`)")],
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Pause entry NAME: every worker skips its slots (they are not run later) until
        `periodic resume NAME`."""

        async def action(redis: Redis, keys: Keys) -> bool | None:
            return await api.pause_periodic(redis, keys, name)

        done = run(redis_url, namespace, action)
        if done is None:
            raise fail(f"no periodic entry named {name!r} (see `periodic list`)", 1)
        typer.echo(f"paused {name}" if done else f"{name} was already paused")

    @periodic.command("resume")
    def periodic_resume(
        name: Annotated[str, typer.Argument(help="The entry's name (see `periodic list`)")],
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Resume entry NAME: its next slots run (those skipped while paused do not)."""

        async def action(redis: Redis, keys: Keys) -> bool | None:
            return await api.resume_periodic(redis, keys, name)

        done = run(redis_url, namespace, action)
        if done is None:
            raise fail(f"no periodic entry named {name!r} (see `periodic list`)", 1)
        typer.echo(f"resumed {name}" if done else f"{name} was not paused")
