"""A failed job's traceback as bounded text: the handler's frames, never the library's.

Every text this module returns is at most ``max_chars`` characters, however
deep the recursion or long the exception's message, and is built only on a
failure (a job that succeeds pays nothing). The bounds, in order:

* frames of this library and of the machinery that runs a handler (asyncio,
  anyio, ``concurrent.futures``, ``threading``) are dropped: what is left is
  the handler's own code and what it called;
* each exception keeps at most ``frames`` frames: its outermost one (where
  the handler was entered) and the innermost ``frames - 1`` (where it raised),
  with a ``[... N frames omitted ...]`` line between; a frame repeated in a row
  is collapsed the way Python does (``[Previous line repeated N more times]``);
* a chain (``raise ... from``, an error while handling another) keeps at most
  ``MAX_CHAIN`` exceptions, an exception group its first ``MAX_GROUP`` members;
* every line is cut to a quarter of ``max_chars`` (a 1 MB message, a minified
  source line), and a text still too long keeps its end, where the exception
  that ended the job is named.

An exception none of whose frames is outside the library (``UnknownJob``,
a verdict of the worker's, not the handler's failure) has no traceback:
``format_backtrace`` answers None rather than a page of the worker's own
frames. A ``JobTimeout`` is the worker's verdict too, but the cancellation
that enforced it went through the handler: when it did, the text shows where
the handler was when its time ran out (its frames, not the worker's), under
``TIMED_OUT_HEADER``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import traceback
from collections.abc import Iterator
from types import ModuleType, TracebackType
from typing import Any

import anyio

from cogworker_async.errors import JobTimeout

MAX_CHAIN = 5  # exceptions of one chain (cause / context) kept, the last ones
MAX_GROUP = 5  # members of an exception group shown
HEADER = "Traceback (most recent call last):\n"
TIMED_OUT_HEADER = "Where the handler was when its timeout cancelled it (most recent call last):\n"
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _directory(module: ModuleType) -> str:
    return os.path.dirname(os.path.abspath(str(module.__file__))) + os.sep


# Frames whose file starts with one of these are the machinery around a
# handler. One startswith per frame: cheap enough for a failure path.
# The package's own directory is found from this file (importing the package
# itself would pull every layer above the worker into it).
_PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
LIBRARY_PREFIXES: tuple[str, ...] = (
    _PACKAGE_DIRECTORY,
    _directory(asyncio),
    _directory(anyio),
    _directory(concurrent.futures),
    os.path.abspath(threading.__file__),
)


def backtrace_frames(option: object, default: int) -> int | None:
    """How many frames a job's stored backtrace keeps, from its ``backtrace`` option
    (Sidekiq's: true, false, or a number): None keeps none.

    Unset or ``True``: ``default``; ``False`` or ``0``: none; ``N``: N frames. A
    value of another type (a foreign producer's) counts as unset: the backtrace
    is kept, the failure is never lost for it.
    """
    if option is False or option == 0:
        return None
    if isinstance(option, int) and not isinstance(option, bool) and option > 0:
        return option
    return default


def format_backtrace(exc: BaseException, *, frames: int, max_chars: int) -> str | None:
    """``exc``'s traceback as text within the bounds above; None when none of its
    frames is the handler's."""
    parts: list[str] = []
    line_max = max(64, max_chars // 4)
    found = _format_chain(exc, frames, line_max, parts, depth=0)
    if not found and isinstance(exc, JobTimeout):
        found = _where_timed_out(exc, frames, line_max, parts)
    if not found:
        return None
    return _keep_end("".join(parts).rstrip("\n"), max_chars)


def _own_frames(tb: TracebackType | None) -> list[tuple[Any, int]]:
    """The traceback's (frame, line) pairs outside the library, outermost first."""
    return [
        (frame, line)
        for frame, line in traceback.walk_tb(tb)
        if not frame.f_code.co_filename.startswith(LIBRARY_PREFIXES)
    ]


def _chain(exc: BaseException) -> list[tuple[BaseException, str]]:
    """The exceptions of ``exc``'s chain, oldest first, each with the line printed
    after it (how it led to the next); the last MAX_CHAIN, a cycle cut."""
    found: list[tuple[BaseException, str]] = [(exc, "")]
    seen = {id(exc)}
    current = exc
    while len(found) < MAX_CHAIN:
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT
        else:
            break
        if id(current) in seen:
            break
        seen.add(id(current))
        found.append((current, link))
    # Each link is printed after its exception (before the one it led to):
    # reversed, the list is in the order Python prints a chain.
    return found[::-1]


def _format_chain(
    exc: BaseException, frames: int, line_max: int, parts: list[str], depth: int
) -> bool:
    """Append ``exc``'s chain to ``parts``; False when no exception of it has a frame
    of the handler's (nothing appended)."""
    chain = _chain(exc)
    stacks = [_own_frames(e.__traceback__) for e, _ in chain]
    if not any(stacks) and not _group_has_frames(exc, depth):
        return False
    for (member, link), own in zip(chain, stacks, strict=True):
        if own:
            parts.append(HEADER)
            parts.extend(_clip(line, line_max) for line in _stack_lines(own, frames))
        parts.extend(_clip(line, line_max) for line in traceback.format_exception_only(member))
        if isinstance(member, BaseExceptionGroup) and depth < 2:
            _format_members(member, frames, line_max, parts, depth)
        parts.append(link)
    return True


def _where_timed_out(exc: JobTimeout, frames: int, line_max: int, parts: list[str]) -> bool:
    """Append where the handler was when the timeout's cancellation reached it: the
    ``CancelledError`` behind the ``TimeoutError`` the worker turned into ``exc``
    (``raise ... from None`` hides it from the chain, not from us)."""
    found: BaseException | None = exc.__context__
    for _ in range(MAX_CHAIN):
        if found is None:
            return False
        if isinstance(found, asyncio.CancelledError):
            break
        found = found.__cause__ or found.__context__
    else:
        return False
    assert found is not None
    own = _own_frames(found.__traceback__)
    if not own:
        return False
    parts.append(TIMED_OUT_HEADER)
    parts.extend(_clip(line, line_max) for line in _stack_lines(own, frames))
    parts.extend(_clip(line, line_max) for line in traceback.format_exception_only(exc))
    return True


def _group_has_frames(exc: BaseException, depth: int) -> bool:
    if not isinstance(exc, BaseExceptionGroup) or depth >= 2:
        return False
    return any(
        _own_frames(member.__traceback__) or _group_has_frames(member, depth + 1)
        for member in exc.exceptions[:MAX_GROUP]
    )


def _format_members(
    group: BaseExceptionGroup[Any], frames: int, line_max: int, parts: list[str], depth: int
) -> None:
    members = group.exceptions
    for index, member in enumerate(members[:MAX_GROUP], start=1):
        parts.append(f"-- member {index} of {len(members)} --\n")
        if not _format_chain(member, frames, line_max, parts, depth + 1):
            parts.extend(_clip(line, line_max) for line in traceback.format_exception_only(member))
    if len(members) > MAX_GROUP:
        parts.append(f"-- and {len(members) - MAX_GROUP} more members --\n")


def _stack_lines(own: list[tuple[Any, int]], frames: int) -> Iterator[str]:
    """The frames' lines: the outermost, then the innermost ``frames - 1``."""
    if len(own) <= frames:
        yield from traceback.StackSummary.extract(iter(own)).format()
        return
    head, tail = own[:1], own[len(own) - (frames - 1) :] if frames > 1 else []
    yield from traceback.StackSummary.extract(iter(head)).format()
    yield f"  [... {len(own) - len(head) - len(tail)} frames omitted ...]\n"
    yield from traceback.StackSummary.extract(iter(tail)).format()


def _clip(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    cut = f" [... {len(line) - limit} characters cut]\n"
    return line[: max(0, limit - len(cut))] + cut


def _keep_end(text: str, max_chars: int) -> str:
    """``text``'s end within ``max_chars``, cut at a line, saying how much went."""
    if len(text) <= max_chars:
        return text
    marker_room = 48
    end = text[len(text) - (max_chars - marker_room) :]
    newline = end.find("\n")
    if 0 <= newline < len(end) - 1:
        end = end[newline + 1 :]
    return f"[... {len(text) - len(end)} characters cut ...]\n" + end
