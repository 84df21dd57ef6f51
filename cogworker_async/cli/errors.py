"""How the command line words its failures: one ``error:`` line, and the exit code.

Exit 2 for a usage mistake, 1 for a runtime failure; passwords are masked
(the URL is always shown through ``Settings.masked_redis_url``). Only a bug
of ours is followed by its traceback.
"""

from __future__ import annotations

import traceback

import typer
from pydantic import ValidationError
from redis import exceptions as rexc

from cogworker_async.settings import Settings
from cogworker_async.store.faults import is_outage


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


_AUTH_REPLIES = ("WRONGPASS", "NOAUTH")


def is_auth_failure(exc: BaseException) -> bool:
    """A wrong or missing user/password (redis-py files some under ConnectionError)."""
    if isinstance(exc, rexc.AuthenticationError | rexc.AuthenticationWrongNumberOfArgsError):
        return True
    return isinstance(exc, rexc.ResponseError) and str(exc).startswith(_AUTH_REPLIES)


def redis_failure(exc: BaseException, settings: Settings) -> str | None:
    """The one line for a failure Redis reported, or None when ``exc`` is not one."""
    where = settings.masked_redis_url
    if is_auth_failure(exc):  # before is_outage: an AuthenticationError is a ConnectionError
        return (
            f"authentication failed at {where}: {exc} "
            "(check the user and password in --redis-url or COGWORKER_REDIS_URL)"
        )
    if is_outage(exc):
        return f"cannot reach Redis at {where}: {exc}"
    if isinstance(exc, rexc.RedisError):
        if "DB index is out of range" in str(exc):
            return (
                f"Redis at {where} has no such database ({exc}): the DB index must be "
                "below the server's `databases` setting (16 by default)"
            )
        return f"Redis at {where} refused: {type(exc).__name__}: {exc}"
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def report(exc: Exception) -> int:
    """Print the one line for ``exc`` (the traceback too if it is a bug); return the exit code."""
    # click's usage errors (vendored by newer typer, so matched by shape): one line.
    exit_code, message = getattr(exc, "exit_code", None), getattr(exc, "format_message", None)
    if isinstance(exit_code, int) and callable(message):
        if type(exc).__name__ == "NoArgsIsHelpError":  # the help is the message (or printed)
            if text := str(message()):
                typer.echo(text, err=True)
            return exit_code
        line = _one_line(str(message())).replace("Value error, ", "")
        ctx = getattr(exc, "ctx", None)
        if ctx is not None and exit_code == 2:
            line += f" (see {ctx.command_path} --help)"
        typer.echo(f"error: {line}", err=True)
        return exit_code
    if isinstance(exc, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        )
        typer.echo(f"error: bad settings: {_one_line(problems)}", err=True)
        return 2
    if isinstance(exc, rexc.RedisError | OSError):
        typer.echo(f"error: {type(exc).__name__}: {_one_line(str(exc))}", err=True)
        return 1
    typer.echo(
        f"error: unexpected {type(exc).__name__}: {_one_line(str(exc))} "
        "(a bug in cogworker-async; its traceback follows)",
        err=True,
    )
    traceback.print_exception(exc)
    return 1
