"""A mistake in a periodic declaration is reported where the user wrote it.

``cron``/``every``/``@periodic`` check their arguments at import, inside this
package: left alone, the error's last frame and the only file it names would
be the library's ``entries.py``. ``blame_the_declaration`` rewrites a
``ValueError``/``TypeError`` raised by a declaration so that its message
starts with the user's ``file:line`` and its traceback ends on that line (the
frame a reader's eye goes to). The exception keeps its builtin type: argument
mistakes stay ``ValueError``/``TypeError`` (STYLE.md, Errors).
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_LIBRARY = "cogworker_async"
_BLAMED = "_cogworker_declared_at"  # set on an exception once it names the user's line


def declaration_frame() -> types.FrameType | None:
    """The innermost frame outside this library: the user's line that declared the
    entry (its module's top level, or the function that built the entry)."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != _LIBRARY and not module.startswith(_LIBRARY + "."):
            return frame
        frame = frame.f_back
    return None


def blame_the_declaration(function: Callable[P, R]) -> Callable[P, R]:
    """Wrap a declaring function: its ``ValueError``/``TypeError`` names the caller's
    file and line (once, however many declaring functions it passes through)."""

    @functools.wraps(function)
    def declare(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except (ValueError, TypeError) as exc:
            if getattr(exc, _BLAMED, None) is not None:
                raise
            frame = declaration_frame()
            if frame is None:
                raise
            where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
            setattr(exc, _BLAMED, where)
            exc.args = (f"{where}: periodic declaration: {exc}", *exc.args[1:])
            # The traceback goes on to the user's line last, so that is the frame the
            # error surfaces in (the library's frames stay above it, for a bug report).
            tail = types.TracebackType(None, frame, frame.f_lasti, frame.f_lineno)
            raise exc.with_traceback(_append(exc.__traceback__, tail)) from exc.__cause__

    return declare


def _append(
    traceback: types.TracebackType | None, tail: types.TracebackType
) -> types.TracebackType:
    if traceback is None:
        return tail
    last = traceback
    while last.tb_next is not None:
        last = last.tb_next
    last.tb_next = tail
    return traceback
