"""Every option and argument of the CLI says what it is for (issue 25 §3): a walk of
the typer app's click command tree fails naming each parameter without help text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer.main

from cogworker_async.cli import app


def _commands(command: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every command under ``command`` with its path. Duck-typed: recent typer releases
    build on their own copy of click, whose classes are not ``click``'s."""
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _commands(sub, f"{path} {name}")


def _help_of(parameter: Any) -> str:
    # typer keeps an argument's help on its TyperArgument (click's Argument has none).
    return (getattr(parameter, "help", None) or "").strip()


def test_every_parameter_has_help() -> None:
    root = typer.main.get_command(app)
    missing = [
        f"{path}: {parameter.name}"
        for path, command in _commands(root, "cogworker-async")
        for parameter in command.params
        if not getattr(parameter, "hidden", False) and not _help_of(parameter)
    ]
    assert len(list(_commands(root, "cogworker-async"))) > 40  # the walk sees the tree
    assert missing == [], "parameters without help text:\n" + "\n".join(missing)


def test_every_command_has_help() -> None:
    root = typer.main.get_command(app)
    bare = [path for path, command in _commands(root, "cogworker-async") if not command.help]
    assert bare == []
