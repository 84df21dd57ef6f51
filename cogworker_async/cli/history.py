"""``stats --history``: the metrics history as tables (or JSON), per day, per minute
and per job name over the minutes shown."""

from __future__ import annotations

import json
import time

import typer

from cogworker_async import api
from cogworker_async.cli import admin as cli_admin
from cogworker_async.observability.history import bucket_label


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _slowest_bucket(histogram: tuple[int, ...]) -> str:
    """The highest bucket any successful run reached ("-" without one)."""
    for index in range(len(histogram) - 1, -1, -1):
        if histogram[index]:
            return bucket_label(index)
    return "-"


def print_history(result: api.History, *, json_out: bool) -> None:
    if json_out:
        typer.echo(json.dumps(result.as_dict(), indent=2))
        return
    typer.echo("per day (UTC)")
    rows = [[d.day, str(d.processed), str(d.failed)] for d in result.days]
    for line in cli_admin.table(["DAY", "PROCESSED", "FAILED"], rows, right={1, 2}):
        typer.echo(line)
    typer.echo("")
    typer.echo("per minute (UTC)")
    rows = [
        [
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(m.at)),
            str(m.processed),
            str(m.failed),
        ]
        for m in result.minutes
    ]
    for line in cli_admin.table(["MINUTE", "PROCESSED", "FAILED"], rows, right={1, 2}):
        typer.echo(line)
    jobs = result.jobs()
    typer.echo("")
    typer.echo(f"per job, over the last {len(result.minutes)} minute(s)")
    if not jobs:
        typer.echo("(none)")
        return
    rows = [
        [
            name,
            str(s.runs),
            str(s.failures),
            _ms(s.mean_run_time),
            _slowest_bucket(s.histogram),
        ]
        for name, s in jobs.items()
    ]
    headers = ["JOB", "RUNS", "FAILED", "MEAN MS", "SLOWEST"]
    for line in cli_admin.table(headers, rows, right={1, 2, 3}):
        typer.echo(line)
