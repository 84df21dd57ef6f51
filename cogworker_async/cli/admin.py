"""The operators' commands: the retry, dead and schedule sets, processes, busy work, quarantine.

Thin like the rest of the CLI: each command calls one ``api`` function and
prints its result (``--json`` for the data). ``cli.py`` hands in how to reach
Redis and how to fail with one line (``register``), so this module never
imports it back.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Annotated, Any, Protocol, TypeVar

import typer
from redis.asyncio import Redis

from cogworker_async import api
from cogworker_async.api import human_size
from cogworker_async.keys import Keys

T = TypeVar("T")

RedisUrl = Annotated[
    str | None, typer.Option("--redis-url", help="Redis URL (COGWORKER_REDIS_URL)")
]
Namespace = Annotated[
    str | None, typer.Option("--namespace", help="Key namespace (COGWORKER_NAMESPACE)")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON")]
Refs = Annotated[
    list[str], typer.Argument(help="Jids (or the sha1:... ref `list` shows for an entry without)")
]


class Runner(Protocol):
    """Runs ``action`` against Redis for the given options (settings, connection, outages)."""

    def __call__(
        self,
        redis_url: str | None,
        namespace: str | None,
        action: Callable[[Redis, Keys], Awaitable[T]],
    ) -> T: ...


Fail = Callable[[str, int], typer.Exit]


def confirm(question: str, *, yes: bool, fail: Fail) -> None:
    """Go ahead with a destructive command: ``--yes``, or a "y" typed at a terminal.

    Not interactive (a script, a pipe) and no ``--yes``: refused, exit 2,
    so a script never deletes by accident and never hangs on a prompt.
    """
    if yes:
        return
    if not sys.stdin.isatty():
        raise fail(f"this would {question}: add --yes to go ahead", 2)
    if not typer.confirm(f"{question[0].upper()}{question[1:]}?", default=False):
        raise fail("nothing deleted", 1)


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], right: Collection[int] = ()
) -> list[str]:
    """Aligned columns under a header row; columns in ``right`` (numbers) flush right."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in [header, *rows]
    ]


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2))


def _when(epoch: float) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) + "Z"
    except (OverflowError, OSError, ValueError):
        return repr(epoch)  # a corrupt score is shown, not fatal


def _entry_line(entry: api.Entry) -> str:
    if entry.job is None:
        detail = f"(unreadable: {entry.problem})"
    else:
        error = f"{entry.error_class}: {entry.error_message}" if entry.error_class else ""
        detail = f"{error} (not runnable: {entry.problem})" if entry.problem else error
    return (
        f"{entry.ref:<24}  {_when(entry.score)}  {entry.queue or '-':<12} "
        f"{entry.name or '-':<28} {detail}".rstrip()
    )


def _entry_detail(entry: api.Entry, which: api.SetName) -> str:
    """An entry as ``name  value`` lines, then its backtrace when it kept one."""
    job = entry.job or {}
    error = f"{entry.error_class}: {entry.error_message}" if entry.error_class else "-"
    rows = [
        ("ref", entry.ref),
        ("failed" if which == "dead" else "due", _when(entry.score)),
        ("job", entry.name or "-"),
        ("queue", entry.queue or "-"),
        ("arguments", json.dumps(job.get("args"), default=str)),
        ("retry count", str(job.get("retry_count", 0))),
        ("error", error),
    ]
    if entry.job is None or entry.problem:
        rows.append(("problem", str(entry.problem)))
    lines = [f"{name:<12} {value}" for name, value in rows]
    backtrace = job.get("error_backtrace")
    if isinstance(backtrace, str) and backtrace:
        lines += ["backtrace:", backtrace]
    return "\n".join(lines)


def _set_app(
    group: str, which: api.SetName, move: str, *, bulk_move: bool, run: Runner, fail: Fail
) -> typer.Typer:
    """``list``, ``<move>``, ``delete`` (and ``retry-all``, ``delete-all``) for one set."""
    sub = typer.Typer(no_args_is_help=True, help=f"The {which} set: list, {move}, delete.")

    order = "newest first" if which == "dead" else "soonest due first"

    @sub.command("list", help=f"Entries, {order}; --search by name, jid or any text.")
    def list_(
        search: Annotated[
            str | None, typer.Option("--search", help="Name, jid or any text (any case)")
        ] = None,
        limit: Annotated[int, typer.Option("--limit", min=1, help="Entries shown at most")] = 50,
        offset: Annotated[
            int, typer.Option("--offset", min=0, help="Entries skipped first (for paging)")
        ] = 0,
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        entries = run(
            redis_url,
            namespace,
            lambda r, k: api.list_entries(r, k, which, search=search, limit=limit, offset=offset),
        )
        if json_out:
            _print_json([e.as_dict() for e in entries])
            return
        for entry in entries:
            typer.echo(_entry_line(entry))
        if not entries:
            typer.echo("(none)")

    @sub.command("show", help="These entries in full: error, arguments and the kept backtrace.")
    def show(
        refs: Refs,
        json_out: JsonFlag = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        entries = run(redis_url, namespace, lambda r, k: api.find_entries(r, k, which, refs))
        if not entries:
            raise fail(f"no entry of {group} matched {' '.join(refs)}", 1)
        if json_out:
            _print_json([e.as_dict() for e in entries])
            return
        typer.echo("\n\n".join(_entry_detail(entry, which) for entry in entries))

    @sub.command(move, help="Put these entries on their queues now (retry count kept).")
    def move_(refs: Refs, redis_url: RedisUrl = None, namespace: Namespace = None) -> None:
        moved = run(redis_url, namespace, lambda r, k: api.retry_now(r, k, which, refs))
        if moved == 0:
            raise fail(f"no runnable entry of {group} matched {' '.join(refs)}", 1)
        typer.echo(f"moved {moved} onto their queues")

    @sub.command("delete")
    def delete_(refs: Refs, redis_url: RedisUrl = None, namespace: Namespace = None) -> None:
        """Delete these entries."""
        deleted = run(redis_url, namespace, lambda r, k: api.delete(r, k, which, refs))
        if deleted == 0:
            raise fail(f"no entry of {group} matched {' '.join(refs)}", 1)
        typer.echo(f"deleted {deleted}")

    if bulk_move:

        @sub.command(f"{move}-all")
        def move_all(redis_url: RedisUrl = None, namespace: Namespace = None) -> None:
            """Put every runnable entry on its queue now."""
            moved = run(redis_url, namespace, lambda r, k: api.retry_all(r, k, which))
            typer.echo(f"moved {moved} onto their queues")

    @sub.command("delete-all")
    def delete_all(
        yes: Annotated[bool, typer.Option("--yes", help="Really delete every entry")] = False,
        redis_url: RedisUrl = None,
        namespace: Namespace = None,
    ) -> None:
        """Delete every entry (asks first, or --yes)."""
        confirm(f"delete every entry of {group}", yes=yes, fail=fail)
        deleted = run(redis_url, namespace, lambda r, k: api.delete_all(r, k, which))
        typer.echo(f"deleted {deleted}")

    return sub


def _ago(epoch: float | None, now: float) -> str:
    return "-" if epoch is None else f"{max(0.0, now - epoch):.1f}s ago"


def _process_line(p: api.ProcessInfo, now: float) -> str:
    beat = f"beat {_ago(p.last_beat, now)}"
    if not p.alive:
        return f"{p.identity}  gone (no presence key)  {beat}"
    if p.problem:
        return f"{p.identity}  alive  (unreadable info: {p.problem})  {beat}"
    line = (
        f"{p.identity}  alive  {p.hostname or '-'}:{p.pid or '-'}  "
        f"busy {p.busy if p.busy is not None else '-'}/{p.concurrency or '-'}  "
        f"queues {','.join(p.queues or []) or '-'}  {beat}"
    )
    if p.rss is not None:
        line += f"  rss {human_size(p.rss)}"
    return line


def register(app: typer.Typer, *, run: Runner, fail: Fail) -> None:
    """Add the operators' commands to ``app``."""
    app.add_typer(
        _set_app("retry", "retry", "retry", bulk_move=True, run=run, fail=fail), name="retry"
    )
    app.add_typer(
        _set_app("dead", "dead", "retry", bulk_move=True, run=run, fail=fail), name="dead"
    )
    app.add_typer(
        _set_app("scheduled", "schedule", "enqueue-now", bulk_move=False, run=run, fail=fail),
        name="scheduled",
    )

    @app.command("processes")
    def processes(
        json_out: JsonFlag = False, redis_url: RedisUrl = None, namespace: Namespace = None
    ) -> None:
        """Worker processes: alive or gone, host, pid, busy/concurrency, queues, last beat."""
        result = run(redis_url, namespace, api.processes)
        if json_out:
            _print_json([p.as_dict() for p in result])
            return
        now = time.time()
        for p in result:
            typer.echo(_process_line(p, now))
        if not result:
            typer.echo("(none)")

    @app.command("busy")
    def busy(
        json_out: JsonFlag = False, redis_url: RedisUrl = None, namespace: Namespace = None
    ) -> None:
        """Jobs live processes are running now."""
        result = run(redis_url, namespace, api.busy)
        if json_out:
            _print_json([b.as_dict() for b in result])
            return
        now = time.time()
        for b in result:
            what = f"{b.name or '-'} {b.jid or '-'}" if b.problem is None else f"({b.problem})"
            since = _ago(b.run_at, now)
            typer.echo(f"{b.identity}  slot {b.slot}  {b.queue or '-'}  {what}  since {since}")
        if not result:
            typer.echo("(none)")

    quarantine = typer.Typer(no_args_is_help=True, help="Keys the key guard moved aside.")
    app.add_typer(quarantine, name="quarantine")

    @quarantine.command("list")
    def quarantine_list(
        json_out: JsonFlag = False, redis_url: RedisUrl = None, namespace: Namespace = None
    ) -> None:
        """Quarantined keys with their type and time to live."""
        result = run(redis_url, namespace, api.quarantine_list)
        if json_out:
            _print_json([q.as_dict() for q in result])
            return
        for q in result:
            ttl = f"expires in {q.ttl}s" if q.ttl is not None else "no expiry"
            typer.echo(f"{q.key}\t{q.type}\t{ttl}")
        if not result:
            typer.echo("(none)")
