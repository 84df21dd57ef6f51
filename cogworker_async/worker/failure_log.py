"""The one log line of a failed attempt, with its bounded traceback below it.

WARNING when the job will be tried again, ERROR when this failure is its last
(buried in dead or discarded): both are seen at the default level. The
traceback goes in the record's ``exc_text``, not ``exc_info``: every standard
formatter (and the CLI's JSON one, as ``exc_info``) prints that text after the
line as it would a traceback, and none can re-format the exception unbounded
(a 1 MB message, a recursion a thousand frames deep).
"""

from __future__ import annotations

import logging
from typing import Any


def log_failure(
    logger: logging.Logger,
    job: dict[str, Any],
    *,
    elapsed: float,
    outcome: str,
    terminal: bool,
    trace: str | None,
) -> None:
    """``jid=<jid> <name> failed queue=<q> after <s> s: <class>: <message>; <outcome>``.

    ``job`` is the failed job as filed (``error_class`` and the capped
    ``error_message`` filled in); ``trace`` the text from
    ``backtraces.format_backtrace`` (None: the line alone).
    """
    level = logging.ERROR if terminal else logging.WARNING
    if not logger.isEnabledFor(level):
        return
    pathname, lineno, func, _ = logger.findCaller()
    record = logger.makeRecord(
        logger.name,
        level,
        pathname,
        lineno,
        "jid=%s %s failed queue=%s after %.3f s: %s: %s; %s",
        (
            job.get("jid"),
            job.get("class"),
            job.get("queue"),
            elapsed,
            job.get("error_class"),
            job.get("error_message"),
            outcome,
        ),
        None,
        func,
    )
    record.exc_text = trace
    logger.handle(record)
