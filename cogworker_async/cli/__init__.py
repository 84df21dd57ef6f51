"""The ``cogworker-async`` command line.

``commands`` (the typer app and the commands that read or change the namespace),
``worker`` (the ``worker`` command and how it finds jobs, lifespan and
periodic entries), ``admin`` (the retry/dead/scheduled/processes groups and
their shared options), ``periodic`` (``periodic list|run-now``), ``args``
(job arguments from command-line words, strict JSON) and ``errors`` (one
``error:`` line and the exit code for every failure).
"""

from cogworker_async.cli.commands import app, main, run_cli

__all__ = ["app", "main", "run_cli"]
