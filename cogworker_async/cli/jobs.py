"""The job commands: ``enqueue``, ``status`` and ``abort`` one job by name or jid, and
``waiting``: the jobs waiting on others (``after=[...]``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated

import typer
from redis.asyncio import Redis

from cogworker_async.cli.admin import JsonFlag, Namespace, RedisUrl
from cogworker_async.cli.args import BadArgument, parse_job_arguments
from cogworker_async.cli.queues import check_queue
from cogworker_async.cli.worker import Fail, RedisRunner
from cogworker_async.client import Client, EnqueuedByName
from cogworker_async.client.aborting import AbortOutcome, abort_job
from cogworker_async.client.tracking import JobStatus, read_status
from cogworker_async.errors import StatusCorrupt
from cogworker_async.keys import Keys
from cogworker_async.lifecycle import STATUS_STRINGS, state_of_status
from cogworker_async.settings import Settings
from cogworker_async.store.after import Waiting, waiting_jobs
from cogworker_async.timing import check_duration

_ABORT_SAYS = {
    AbortOutcome.REMOVED: "removed: job {jid} was waiting; it will never run",
    AbortOutcome.CANCELLING: "cancelling: job {jid} is running; its process cancels it "
    "(a plain def: filed as aborted when it returns)",
    AbortOutcome.FINISHED: "finished: job {jid} has already finished; nothing to abort",
    AbortOutcome.NOT_FOUND: "not found: no job {jid} is waiting or running "
    "(unknown, or finished without a trace)",
}


def register(
    app: typer.Typer, *, build_settings: Callable[..., Settings], run: RedisRunner, fail: Fail
) -> None:
    """Add ``enqueue``, ``status``, ``abort`` and ``waiting`` to ``app``."""

    @app.command()
    def enqueue(
        name: Annotated[str, typer.Argument(help="Registered job name")],
        args: Annotated[
            list[str] | None,
            typer.Argument(help="Arguments, each as JSON; NAME=JSON for a keyword argument"),
        ] = None,
        queue: Annotated[
            str | None,
            typer.Option("--queue", help="Default: the job's own if declared here, else default"),
        ] = None,
        delay: Annotated[float | None, typer.Option("--in", help="Run in SECONDS")] = None,
        kwargs_json: Annotated[
            str | None, typer.Option("--kwargs", help="Keyword arguments as one JSON object")
        ] = None,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Enqueue job NAME with JSON arguments; prints its jid."""
        if not name.strip():
            raise fail("the job name must not be empty")
        if queue is not None:
            check_queue(queue, fail)
        if delay is not None:
            try:
                check_duration(delay, "--in", zero_ok=True)
            except ValueError as exc:
                raise fail(str(exc)) from None
        try:
            parsed, keywords = parse_job_arguments(args or [], kwargs_json)
        except BadArgument as exc:
            raise fail(str(exc)) from None
        settings = build_settings(redis_url=redis_url, namespace=namespace)

        async def action(redis: Redis, keys: Keys) -> EnqueuedByName:
            client = Client(settings, redis=redis)
            try:
                return await client.enqueue_by_name(
                    name, parsed, keywords, queue=queue, delay=delay
                )
            except (TypeError, ValueError) as exc:  # the client refused the job as given
                raise fail(str(exc)) from None

        done = run(settings, action)
        typer.echo(done.jid)  # stdout: the jid alone, for scripts; what else to say, on stderr
        if done.duplicate:
            typer.echo(f"not enqueued: a unique job held by {done.jid} (printed above)", err=True)
        if queue is None and not done.known_here:
            typer.echo(done.describe(name), err=True)
        for warning in done.warnings:
            typer.echo(f"warning: {warning}", err=True)

    @app.command()
    def status(
        jid: Annotated[str, typer.Argument(help="The job's jid")],
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """A job's status (jobs with status tracking on): state, times, last error."""
        settings = build_settings(redis_url=redis_url, namespace=namespace)

        async def action(redis: Redis, keys: Keys) -> JobStatus | None:
            try:
                return await read_status(redis, keys, jid.strip())
            except StatusCorrupt as exc:  # one line naming the key and field
                raise fail(str(exc), 1) from None

        found = run(settings, action)
        if found is None:
            raise fail(
                f"no status for job {jid}: unknown, not tracked (status=True), or expired", 1
            )
        if json_out:
            typer.echo(json.dumps(found.as_dict(), indent=2))
            return
        for name, value in found.as_dict().items():
            if name == "progress" and found.progress is not None:
                typer.echo(f"{name:<14} {found.progress.describe()}")
            elif name == "waiting_on" and found.waiting_on is not None:
                typer.echo(f"{name:<14} {', '.join(found.waiting_on) or '-'}")
            elif value is not None:
                typer.echo(f"{name:<14} {value}")
            if name == "state" and value in STATUS_STRINGS:
                # Where the lifecycle table puts a job in that state (docs: concepts/lifecycle).
                typer.echo(f"{'place':<14} {state_of_status(value).place.value}")

    @app.command()
    def abort(
        jid: Annotated[str, typer.Argument(help="The job's jid")],
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Abort a job: a waiting one never runs, a running one is cancelled by its process.

        Exit 0 when it was removed or is being cancelled; 1 when there was nothing
        to abort (finished, or not found).
        """
        settings = build_settings(redis_url=redis_url, namespace=namespace)
        wanted = jid.strip()

        async def action(redis: Redis, keys: Keys) -> AbortOutcome:
            return await abort_job(redis, keys, settings, wanted)

        outcome = run(settings, action)
        if json_out:
            typer.echo(json.dumps({"jid": wanted, "outcome": outcome.value}))
        elif outcome.aborted:
            typer.echo(_ABORT_SAYS[outcome].format(jid=wanted))
        else:
            raise fail(_ABORT_SAYS[outcome].format(jid=wanted), 1)
        if not outcome.aborted:
            raise typer.Exit(1)

    @app.command()
    def waiting(
        limit: Annotated[int, typer.Option(help="List at most this many", min=1)] = 100,
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """The jobs waiting on others (after=[...]): jid, job, queue, what they wait on."""
        settings = build_settings(redis_url=redis_url, namespace=namespace)

        async def action(redis: Redis, keys: Keys) -> list[Waiting]:
            return await waiting_jobs(redis, keys, limit=limit)

        found = run(settings, action)
        rows = [
            {
                "jid": w.jid,
                "class": w.job.get("class"),
                "queue": w.job.get("queue"),
                "waiting_on": list(w.waiting_on),
            }
            for w in found
        ]
        if json_out:
            typer.echo(json.dumps(rows, indent=2))
            return
        if not found:
            typer.echo("no job waits on others")
        for w in found:
            on = ", ".join(w.waiting_on) or "-"
            typer.echo(
                f"{w.jid}  {w.job.get('class')}  queue={w.job.get('queue')}  waiting on {on}"
            )
