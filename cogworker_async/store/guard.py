"""The key guard's Redis side: what a counter may hold, and the quarantine moves
(of a key, and of one unusable record in a list).

``quarantine`` wraps ``quarantine.lua``: the script checks the key's type
again and moves it aside only if it is still wrong, so a key fixed between the
caller's check and the move stays where it is.
"""

from __future__ import annotations

import re
import time
from typing import Literal

from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.scripts import script

QUARANTINE_TTL = 7 * 24 * 3600
"""How long a quarantined key is kept for a human to look at (seconds)."""

ExpectedType = Literal["list", "set", "zset", "hash", "string", "integer"]
"""A type as TYPE names it, or ``integer``: a string holding an integer (a counter)."""

_INTEGER = re.compile(rb"0|-?[1-9][0-9]*")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
COUNTER_PEEK = 64
"""Bytes of a counter read to judge it: an integer has at most 20, so more means corrupt."""


def holds_integer(value: bytes) -> bool:
    """True when INCR would accept ``value``: what ``quarantine.lua`` checks too."""
    if len(value) > 20 or _INTEGER.fullmatch(value) is None:
        return False
    return _INT64_MIN <= int(value) <= _INT64_MAX


async def quarantine_record(redis: Redis, keys: Keys, *, source: str, raw: bytes) -> str:
    """Move one unusable record out of the list ``source`` to the list
    ``<ns>:quarantine:<source>:records`` (kept ``QUARANTINE_TTL``), in one ``MULTI``:
    appended there and removed here at once, never lost nor kept twice. Returns
    where it went."""
    target = keys.quarantine(f"{source}:records")
    async with redis.pipeline(transaction=True) as pipe:
        pipe.rpush(target, raw)
        pipe.expire(target, QUARANTINE_TTL)
        pipe.lrem(source, 1, raw)  # type: ignore[arg-type]  # bytes are fine
        await pipe.execute()
    return target


async def quarantine(
    redis: Redis,
    keys: Keys,
    *,
    key: str,
    expected: ExpectedType,
    ttl: int = QUARANTINE_TTL,
) -> str | None:
    """Move ``key`` to its quarantine key if it is not of type ``expected``.

    Returns where it went (``<ns>:quarantine:<key>``, or that with ``:<time>``
    appended when an earlier quarantine of the same key is still there), or
    None when nothing was moved: the key is absent or has the expected type.
    """
    moved = await script("quarantine").run(
        redis, [key, keys.quarantine(key)], [expected, ttl, time.time()]
    )
    if moved is None or moved is False:
        return None
    return moved.decode() if isinstance(moved, bytes) else str(moved)
