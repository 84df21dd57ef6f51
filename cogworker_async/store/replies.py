"""Redis replies as Python values: the client hands back bytes, or str when decoding is on.

One place for the conversions every reader of a reply needs, so a change of
client or ``decode_responses`` touches nothing else.
"""

from __future__ import annotations


def text(value: object) -> str:
    """A reply as text: bytes decoded as UTF-8 (strictly), anything else through ``str``."""
    return value.decode() if isinstance(value, bytes) else str(value)


def loose_text(value: object) -> str:
    """As ``text``, but bytes that are not UTF-8 are shown with replacement characters."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def raw(value: bytes | str) -> bytes:
    """A reply as bytes (a job payload exactly as stored)."""
    return value if isinstance(value, bytes) else value.encode()


def count(value: object) -> int:
    """A reply as a count; an error reply or a corrupt value reads as 0 (a counter is
    best-effort: one bad value must not break a whole stats read or scrape)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, bytes | str):
        try:
            return int(value)
        except ValueError:
            return 0
    return 0
