"""Log formatters for the ``cogworker-async`` command (``--log-format json|text``).

The library itself never configures logging: only the CLI installs these. A
JSON line is one object per record, always with ``time`` (ISO 8601, UTC),
``level``, ``logger`` and ``message``, then every extra the call passed
(``log.info("...", extra={"jid": jid})``), and ``exc_info``/``stack_info``
as text when present. A formatter must never raise, so a value JSON can't
hold is written as its ``str()``.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Every attribute a plain LogRecord has: anything else on a record came from
# ``extra=`` (or a filter) and is written out as a field of its own.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
_FIXED = ("time", "level", "logger", "message")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any extras."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and name not in _FIXED:
                data[name] = value
        if record.exc_info:
            data["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["exc_info"] = record.exc_text
        if record.stack_info:
            data["stack_info"] = self.formatStack(record.stack_info)
        try:
            return json.dumps(data, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            # A circular or otherwise unencodable extra: keep the line, lose the detail.
            return json.dumps({k: v if k in _FIXED else repr(v) for k, v in data.items()})


def handler(log_format: str) -> logging.Handler:
    """A stderr handler for ``text`` or ``json`` (``ValueError`` for anything else)."""
    stream = logging.StreamHandler()
    if log_format == "json":
        stream.setFormatter(JsonFormatter())
    elif log_format == "text":
        stream.setFormatter(logging.Formatter(TEXT_FORMAT))
    else:
        raise ValueError(f"unknown log format {log_format!r}: expected json or text")
    return stream
