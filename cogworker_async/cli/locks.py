"""``cogworker-async locks list|delete KEY|delete-orphaned``: thin, over ``api.locks``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated

import typer

from cogworker_async import api
from cogworker_async.cli.admin import JsonFlag, Namespace, RedisUrl, Runner, confirm


def _line(lock: api.LockInfo) -> str:
    ttl = f"{lock.ttl:.0f}s" if lock.ttl is not None else "no expiry"
    return f"{lock.key}\t{lock.name or '-'}\theld by {lock.holder}\t{ttl}"


def register(app: typer.Typer, *, run: Runner, fail: Callable[[str, int], typer.Exit]) -> None:
    locks = typer.Typer(no_args_is_help=True, help="Unique-job locks.")
    app.add_typer(locks, name="locks")

    @locks.command("list")
    def locks_list(
        name: Annotated[str | None, typer.Option("--name", help="Only this job's locks")] = None,
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Every unique lock: key, job name, holder jid, time left."""
        result = run(redis_url, namespace, lambda r, k: api.list_locks(r, k, name=name))
        if json_out:
            typer.echo(json.dumps([lock.as_dict() for lock in result], indent=2))
            return
        for lock in result:
            typer.echo(_line(lock))
        if not result:
            typer.echo("(none)")

    @locks.command("delete")
    def locks_delete(
        key: Annotated[str, typer.Argument(help="The lock's key (as `locks list` shows it)")],
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Delete one lock: the next enqueue of its job goes through. A key under the
        lock prefix that is not a string is moved to quarantine instead."""
        try:
            deleted = run(redis_url, namespace, lambda r, k: api.delete_lock(r, k, key))
        except ValueError as exc:
            raise fail(str(exc), 2) from None
        if not deleted:
            raise fail(f"no lock {key}", 1)
        typer.echo(deleted)

    @locks.command("delete-orphaned")
    def locks_delete_orphaned(
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Don't ask")] = False,
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Delete the locks whose holder is nowhere (not queued, scheduled, retrying or
        in progress); each checked and deleted in one atomic step."""
        confirm("delete every orphaned unique lock", yes=yes, fail=fail)
        result = run(redis_url, namespace, api.delete_orphaned)
        if json_out:
            typer.echo(json.dumps([lock.as_dict() for lock in result], indent=2))
            return
        for lock in result:
            typer.echo(f"deleted {_line(lock)}")
        typer.echo(f"{len(result)} orphaned lock{'' if len(result) == 1 else 's'} deleted")
