"""What a request names, read strictly: a bad one is ``BadParameter``, a 400 naming it.

The invariant: no parameter reaches Redis unless Redis can take it. A page
number, a scan cursor or a queue index is a plain decimal integer within
range (Redis refuses ranks and cursors past 64 bits, and ``1e21`` is not an
integer); an entry's token is a finite score and a reference (``nan`` and
``inf`` are no score ``ZRANGEBYSCORE`` can look up).
"""

from __future__ import annotations

import math

from starlette.requests import Request

from cogworker_async.api.browsing import Ref

MAX_PAGE = 10**9
"""A page number past any set Redis can hold at 50 a page (and an int Redis takes)."""
MAX_CURSOR = 2**64 - 1
"""SCAN cursors are unsigned 64-bit integers."""
MAX_INDEX = 2**62
"""A queue index: within Redis's signed 64-bit ranks once a window is added to it."""
_MAX_DIGITS = 20


class BadParameter(ValueError):
    """A request parameter the UI cannot use; the message names it and says why."""


def integer(name: str, given: str | None, *, default: int, low: int, high: int) -> int:
    """``given`` as a decimal integer from ``low`` to ``high`` (None or empty: ``default``)."""
    if given is None or given == "":
        return default
    text = given.strip()
    digits = text.removeprefix("-")
    # Length first: int() of thousands of digits is slow, or refused.
    if not digits.isascii() or not digits.isdigit() or len(digits) > _MAX_DIGITS:
        raise BadParameter(f"bad {name} {_shown(given)}: expected a whole number")
    value = int(text)
    if not low <= value <= high:
        raise BadParameter(f"bad {name} {_shown(given)}: expected {low} to {high}")
    return value


def page_number(request: Request) -> int:
    """``?page=``: 1 (the first page) to ``MAX_PAGE``."""
    return integer("page", request.query_params.get("page"), default=1, low=1, high=MAX_PAGE)


PAGE_SIZES = (25, 50, 100, 200)
"""The rows a page of a set or a queue may show (``?size=``); 50 unless asked."""
DEFAULT_PAGE_SIZE = 50


def page_size(request: Request) -> int:
    """``?size=``: one of ``PAGE_SIZES`` (none given: ``DEFAULT_PAGE_SIZE``)."""
    size = integer(
        "size", request.query_params.get("size"), default=DEFAULT_PAGE_SIZE, low=1, high=1000
    )
    if size not in PAGE_SIZES:
        raise BadParameter(f"bad size {size}: expected one of {', '.join(map(str, PAGE_SIZES))}")
    return size


def cursor(request: Request) -> int:
    """``?cursor=``: where a search goes on, a SCAN cursor (0: from the start)."""
    given = request.query_params.get("cursor")
    return integer("cursor", given, default=0, low=0, high=MAX_CURSOR)


def entry_ref(token: str) -> Ref:
    """A ``<score>~<ref>`` token (``browsing.ref_token``) read back."""
    score_text, sep, ref = token.partition("~")
    try:
        score = float(score_text)
    except ValueError:
        score = math.nan
    if not sep or not ref or not math.isfinite(score):
        raise BadParameter(f"bad ref {_shown(token)}: expected <score>~<jid>, as a page links it")
    return Ref(score, ref)


def _shown(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"
