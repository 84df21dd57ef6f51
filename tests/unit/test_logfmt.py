"""The JSON log formatter: fixed fields, extras, exceptions, values JSON can't hold."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from cogworker_async.observability.logfmt import JsonFormatter, handler


def record(**extra: object) -> logging.LogRecord:
    logger = logging.getLogger("tests.logfmt")
    return logger.makeRecord(
        "tests.logfmt", logging.WARNING, __file__, 1, "jid=%s failed", ("abc",), None, extra=extra
    )


def test_fixed_fields_and_extras() -> None:
    line = JsonFormatter().format(record(jid="abc", attempt=2, where={"queue": "mail"}))
    data = json.loads(line)
    assert data["level"] == "WARNING"
    assert data["logger"] == "tests.logfmt"
    assert data["message"] == "jid=abc failed"
    assert data["time"].endswith("+00:00")
    assert (data["jid"], data["attempt"], data["where"]) == ("abc", 2, {"queue": "mail"})
    assert "args" not in data
    assert "msg" not in data
    assert "\n" not in line


def test_exceptions_and_unencodable_values_stay_one_line() -> None:
    try:
        raise ValueError("bad")
    except ValueError:
        rec = record(thing=object())
        rec.exc_info = sys.exc_info()
    line = JsonFormatter().format(rec)
    assert "\n" not in line
    data = json.loads(line)
    assert "ValueError: bad" in data["exc_info"]
    assert data["thing"].startswith("<object object")

    loop: dict[str, object] = {}
    loop["self"] = loop
    data = json.loads(JsonFormatter().format(record(loop=loop)))
    assert data["loop"] == "{'self': {...}}"


def test_handler_choices() -> None:
    assert isinstance(handler("json").formatter, JsonFormatter)
    assert not isinstance(handler("text").formatter, JsonFormatter)
    with pytest.raises(ValueError, match="unknown log format 'xml'"):
        handler("xml")
