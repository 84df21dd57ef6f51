"""``cogworker-async limits list|set KEY LIMIT [--per SECONDS]|clear KEY|clear-held KEY``:
thin, over ``api.limits``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated

import typer

from cogworker_async import api
from cogworker_async.cli.admin import JsonFlag, Namespace, RedisUrl, Runner, confirm


def _line(row: api.LimitInfo) -> str:
    limit = row.limit or "as declared"
    paused = f"\tpaused {row.paused:.0f}s more" if row.paused is not None else ""
    return (
        f"{row.key}\trunning {row.running}\theld {row.held}\tlimit {limit}"
        f"\tadmitted {row.admitted:g}/s{paused}"
    )


def _fair_line(line: api.FairLine) -> str:
    return f"fair {line.queue}\t{line.key}\twaiting {line.waiting}\tweight {line.weight}"


def register(app: typer.Typer, *, run: Runner, fail: Callable[[str, int], typer.Exit]) -> None:
    limits = typer.Typer(no_args_is_help=True, help="Rate and concurrency limits.")
    app.add_typer(limits, name="limits")

    @limits.command("list")
    def limits_list(
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Every limit key in use: jobs running with its slot, jobs held on it, its
        run-time limit, jobs admitted a second (the last full 10 s), the time its
        pause (limits.BackOff) has left; then the fair keys with jobs waiting (as
        `limits fair`)."""
        result = run(redis_url, namespace, api.list_limits)
        if json_out:
            typer.echo(json.dumps([row.as_dict() for row in result], indent=2))
            return
        for row in result:
            typer.echo(_line(row))
        fair = run(redis_url, namespace, api.list_fair)
        for line in fair:
            typer.echo(_fair_line(line))
        if not result and not fair:
            typer.echo("(none)")

    @limits.command("fair")
    def limits_fair(
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Every fair key (limits.fair) with jobs waiting: its queue, jobs waiting on
        its line, its weight; by queue, the key whose turn is next first."""
        result = run(redis_url, namespace, api.list_fair)
        if json_out:
            typer.echo(json.dumps([asdict(line) for line in result], indent=2))
            return
        for line in result:
            typer.echo(_fair_line(line))
        if not result:
            typer.echo("(none)")

    @limits.command("set")
    def limits_set(
        key: Annotated[str, typer.Argument(help="The limit's key, as resolved (acct:7)")],
        limit: Annotated[int, typer.Argument(help="Jobs at once, or starts per --per")],
        per: Annotated[
            float | None, typer.Option("--per", help="A window limit's period, in seconds")
        ] = None,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Limit KEY to LIMIT from now on, over what its jobs declare; held jobs the
        new limit has room for are let in."""
        try:
            run(redis_url, namespace, lambda r, k: api.set_limit(r, k, key, limit, per))
        except (ValueError, TypeError) as exc:
            raise fail(str(exc), 2) from None
        typer.echo(f"{key}: limit {limit}" + (f" per {per:g} s" if per is not None else ""))

    @limits.command("clear")
    def limits_clear(
        key: Annotated[str, typer.Argument(help="The limit's key")],
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Back to what KEY's jobs declare, and end its pause (limits.BackOff)."""
        try:
            cleared = run(redis_url, namespace, lambda r, k: api.clear_limit(r, k, key))
        except (ValueError, TypeError) as exc:
            raise fail(str(exc), 2) from None
        if not cleared:
            raise fail(f"{key}: no run-time limit or pause to clear", 1)
        typer.echo(f"{key}: cleared")

    @limits.command("clear-held")
    def limits_clear_held(
        key: Annotated[str, typer.Argument(help="The limit's key")],
        yes: Annotated[bool, typer.Option("--yes", help="Do not ask")] = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Delete every job held on KEY (they never run; what they hold is released,
        a batch counts them failed); asks first. One job: `abort JID`."""
        confirm(f"delete every job held on limit {key}", yes=yes, fail=fail)
        try:
            removed = run(redis_url, namespace, lambda r, k: api.clear_held(r, k, key))
        except (ValueError, TypeError) as exc:
            raise fail(str(exc), 2) from None
        typer.echo(f"deleted {removed} held job(s) of {key}")
