"""``cogworker-async batches list|show BID``: thin, over ``api.batches``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer

from cogworker_async import api
from cogworker_async.cli.admin import JsonFlag, Namespace, RedisUrl, Runner


def _line(batch: dict[str, Any]) -> str:
    counts = (
        f"{batch['succeeded']} ok, {batch['failed']} failed, {batch['dead']} dead, "
        f"{batch['pending']} pending of {batch['total']}"
    )
    described = f"\t{batch['description']}" if batch["description"] else ""
    return f"{batch['bid']}\t{batch['state']}\t{counts}{described}"


def register(app: typer.Typer, *, run: Runner, fail: Callable[[str, int], typer.Exit]) -> None:
    batches = typer.Typer(no_args_is_help=True, help="Batches: their progress and callbacks.")
    app.add_typer(batches, name="batches")

    @batches.command("list")
    def batches_list(
        limit: Annotated[int, typer.Option("--limit", min=1, help="How many, newest first")] = 50,
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """The newest batches: bid, state, counts, description."""
        result = run(redis_url, namespace, lambda r, k: api.list_batches(r, k, limit))
        if json_out:
            typer.echo(json.dumps(result, indent=2))
            return
        for batch in result:
            typer.echo(_line(batch))
        if not result:
            typer.echo("(none)")

    @batches.command("show")
    def batches_show(
        bid: Annotated[str, typer.Argument(help="The batch's id (as `batches list` shows it)")],
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """One batch: state, counts, callbacks, and the members still pending."""
        batch = run(redis_url, namespace, lambda r, k: api.show_batch(r, k, bid.strip()))
        if batch is None:
            raise fail(f"no batch {bid.strip()}", 1)
        if json_out:
            typer.echo(json.dumps(batch, indent=2))
            return
        typer.echo(_line(batch))
        if batch["parent"]:
            typer.echo(f"parent\t{batch['parent']}")
        for event, state in batch["callbacks"].items():
            typer.echo(f"on_{event}\t{state}")
        for member in batch["pending_members"]:
            typer.echo(f"pending\t{member}")
