"""Job arguments from command-line words: each positional one JSON, keywords ``NAME=JSON``.

The payload's rule (strict JSON: no NaN or infinity, integers within 64 bits)
applied to the text itself, so a refusal can quote what was typed.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from cogworker_async import payload


class BadArgument(ValueError):
    """A word that is not an argument the payload could carry; the message says why."""


_INT64 = (payload.INT64_MIN, payload.INT64_MAX)
_KEYWORD = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.DOTALL)


class _NotPortable(ValueError):
    """JSON Python reads but other languages (and the payload encoder) would not."""


def _refuse_constant(text: str) -> Any:
    raise _NotPortable(f"{text} is not a JSON number")


def _portable_int(text: str) -> int:
    # Checked by length first: Python refuses to parse over 4300 digits at all.
    value = int(text) if len(text) <= 21 else None
    if value is None or not _INT64[0] <= value <= _INT64[1]:
        raise _NotPortable(
            f"integer {text[:24]}{'...' if len(text) > 24 else ''} does not fit in 64 bits"
        )
    return value


def _portable_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotPortable(f"number {text} is too large for a 64-bit float")
    return value


def parse_json_argument(text: str, what: str) -> Any:
    """``text`` as portable JSON (no NaN or infinity, integers within 64 bits)."""
    try:
        return json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_int=_portable_int,
            parse_float=_portable_float,
        )
    except _NotPortable as exc:
        raise BadArgument(f"{what} is not portable JSON ({exc}): {text[:80]!r}") from None
    except json.JSONDecodeError as exc:
        raise BadArgument(f"{what} is not JSON ({exc.msg}): {text[:80]!r}") from None


def parse_job_arguments(
    texts: list[str], kwargs_json: str | None
) -> tuple[list[Any], dict[str, Any]]:
    """Positional arguments (each JSON) and keyword ones (``NAME=JSON`` or ``--kwargs``).

    ``NAME=...`` is never valid JSON, so it cannot be mistaken for a positional one.
    """
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    if kwargs_json is not None:
        given = parse_json_argument(kwargs_json, "--kwargs")
        if not isinstance(given, dict):
            raise BadArgument(
                f'--kwargs must be a JSON object, like \'{{"to": "a@b.c"}}\': {kwargs_json[:80]!r}'
            )
        kwargs.update(given)
    for index, text in enumerate(texts):
        keyword = _KEYWORD.match(text)
        if keyword is None:
            args.append(parse_json_argument(text, f"argument {index}"))
            continue
        name = keyword["name"]
        if name in kwargs:
            raise BadArgument(f"keyword argument {name!r} is given twice")
        kwargs[name] = parse_json_argument(keyword["value"], f"keyword argument {name!r}")
    return args, kwargs
