"""Jinja filters: times, durations, sizes and payload text, shown the same on every page."""

from __future__ import annotations

import time
from typing import Any

import orjson
from jinja2 import Environment

from cogworker_async.api import human_size
from cogworker_async.settings import check_queue_name

CLIP = 160
NAME_CLIP = 120
"""A name, error class or identity in a list: clipped, the whole of it on the detail page."""
DETAIL_CLIP = 64 * 1024
ACTIONABLE = 1024
"""A name longer than this gets no per-row button: it would be in the page (a hidden
field, a confirmation) as many times as there are buttons; the CLI acts on it."""


def when(epoch: Any) -> str:
    """Epoch seconds as a UTC time; a corrupt value shown as it is."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(epoch))) + "Z"
    except (OverflowError, OSError, ValueError, TypeError):
        return repr(epoch)


def relative(epoch: Any, now: float | None = None) -> str:
    """``in 5m`` / ``3s ago`` from now."""
    try:
        delta = float(epoch) - (time.time() if now is None else now)
    except (TypeError, ValueError):
        return "?"
    text = duration(abs(delta))
    return f"in {text}" if delta > 0 else f"{text} ago"


def duration(seconds: Any) -> str:
    try:
        s = float(seconds)
    except (TypeError, ValueError):
        return "?"
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{s // 60:.0f}m{s % 60:02.0f}s"
    if s < 86400:
        return f"{s // 3600:.0f}h{s % 3600 // 60:02.0f}m"
    return f"{s // 86400:.0f}d{s % 86400 // 3600:02.0f}h"


def clip(value: Any, limit: int = CLIP) -> str:
    text = value if isinstance(value, str) else _json(value)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


def short(value: Any) -> str:
    """A name in a list: clipped to ``NAME_CLIP`` characters, saying how long it was."""
    return clip(value, NAME_CLIP)


def valid_queue(name: Any) -> bool:
    try:
        check_queue_name(name)
    except ValueError:
        return False
    return True


def actionable(name: Any) -> bool:
    return isinstance(name, str) and 0 < len(name) <= ACTIONABLE


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def pretty(value: Any) -> str:
    """A value as indented JSON, clipped to ``DETAIL_CLIP`` characters."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        text = repr(value)
    return clip(text, DETAIL_CLIP)


def size(value: Any) -> str:
    return human_size(int(value)) if isinstance(value, int) else "-"


def install(env: Environment) -> None:
    env.filters.update(
        when=when,
        relative=relative,
        duration=duration,
        clip=clip,
        short=short,
        pretty=pretty,
        size=size,
    )
    env.tests.update(valid_queue=valid_queue, actionable=actionable)
    env.globals["now"] = time.time
