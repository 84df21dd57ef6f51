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
import importlib.metadata
import json
import logging
import math
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError
from redis.asyncio import Redis

from cogworker_async import api
from cogworker_async.cli import admin as cli_admin
from cogworker_async.cli import history as cli_history
from cogworker_async.cli import locks as locks_cli
from cogworker_async.cli import periodic as periodic_cli
from cogworker_async.cli import web as cli_web
from cogworker_async.cli import worker as cli_worker
from cogworker_async.cli.args import BadArgument, parse_job_arguments
from cogworker_async.cli.errors import fail, redis_failure, report
from cogworker_async.client import Client, EnqueuedByName
from cogworker_async.client.aborting import AbortOutcome, abort_job
from cogworker_async.client.tracking import JobStatus, read_status
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings, check_queue_name
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

RedisUrl = Annotated[
    str | None, typer.Option("--redis-url", help="Redis URL (COGWORKER_REDIS_URL)")
]
Namespace = Annotated[
    str | None, typer.Option("--namespace", help="Key namespace (COGWORKER_NAMESPACE)")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON")]


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


def _check_queue(queue: str) -> None:
    # The client's rule: no worker could ever read a queue its -q refuses.
    try:
        check_queue_name(queue)
    except ValueError as exc:
        raise fail(str(exc)) from None


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
        _check_queue(queue)
    if delay is not None and not (math.isfinite(delay) and delay >= 0):
        raise fail(f"--in takes a finite number of seconds, 0 or more: got {delay}")
    try:
        parsed, keywords = parse_job_arguments(args or [], kwargs_json)
    except BadArgument as exc:
        raise fail(str(exc)) from None
    settings = build_settings(redis_url=redis_url, namespace=namespace)

    async def action(redis: Redis, keys: Keys) -> EnqueuedByName:
        client = Client(settings, redis=redis)
        try:
            return await client.enqueue_by_name(name, parsed, keywords, queue=queue, delay=delay)
        except (TypeError, ValueError) as exc:  # the client refused the job as given
            raise fail(str(exc)) from None

    done = run_redis(settings, action)
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
        return await read_status(redis, keys, jid.strip())

    found = run_redis(settings, action)
    if found is None:
        raise fail(f"no status for job {jid}: unknown, not tracked (status=True), or expired", 1)
    if json_out:
        typer.echo(json.dumps(found.as_dict(), indent=2))
        return
    for name, value in found.as_dict().items():
        if value is not None:
            typer.echo(f"{name:<14} {value}")


_ABORT_SAYS = {
    AbortOutcome.REMOVED: "removed: job {jid} was waiting; it will never run",
    AbortOutcome.CANCELLING: "cancelling: job {jid} is running; its process cancels it "
    "(a plain def: filed as aborted when it returns)",
    AbortOutcome.FINISHED: "finished: job {jid} has already finished; nothing to abort",
    AbortOutcome.NOT_FOUND: "not found: no job {jid} is waiting or running "
    "(unknown, or finished without a trace)",
}


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

    outcome = run_redis(settings, action)
    if json_out:
        typer.echo(json.dumps({"jid": wanted, "outcome": outcome.value}))
    elif outcome.aborted:
        typer.echo(_ABORT_SAYS[outcome].format(jid=wanted))
    else:
        raise fail(_ABORT_SAYS[outcome].format(jid=wanted), 1)
    if not outcome.aborted:
        raise typer.Exit(1)


@app.command()
def stats(
    json_out: JsonFlag = False,
    redis_url: RedisUrl = None,
    namespace: Namespace = None,
    history: Annotated[
        bool, typer.Option("--history", help="The metrics history instead: per day, minute, job")
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

        cli_history.print_history(run_redis(settings, read), json_out=json_out)
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

        typer.echo(json.dumps(run_redis(settings, read_all), indent=2))
        return
    result = run_redis(settings, api.stats)
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
    result = run_redis(settings, api.queues)
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
        queue: Annotated[str, typer.Argument()],
        force: Annotated[
            bool, typer.Option("--force", help="Even a queue nothing knows (not a typo)")
        ] = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        _check_queue(queue)
        settings = build_settings(redis_url=redis_url, namespace=namespace)

        async def act(redis: Redis, keys: Keys) -> bool:
            try:
                return bool(await action(redis, keys, queue, force=force))
            except api.UnknownQueueError as exc:
                raise fail(str(exc).replace(" (force=True)", "")) from None

        if not run_redis(settings, act):
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
    queue: Annotated[str, typer.Argument()],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask")] = False,
    redis_url: RedisUrl = None,
    namespace: Namespace = None,
) -> None:
    """Delete every job waiting on QUEUE (it stays listed, and paused if it was); asks first."""
    if queue is not None:
        _check_queue(queue)
    settings = build_settings(redis_url=redis_url, namespace=namespace)
    cli_admin.confirm(f"delete every job waiting on {queue}", yes=yes, fail=fail)
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
periodic_cli.register(app, run=_run_admin, fail=fail)
cli_web.register(app, build_settings=build_settings, fail=fail)
locks_cli.register(app, run=_run_admin, fail=fail)


def _version(value: bool) -> None:
    if value:
        try:
            version = importlib.metadata.version("cogworker-async")
        except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
            from cogworker_async import __version__ as version
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
