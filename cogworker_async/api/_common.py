"""Helpers the admin views share: the set members and key types they read, and the
wrong-type warning every view gives instead of raising on bad data.

There is one logger for the whole package, named ``cogworker_async.api`` as
the single module was before it became a package, so logging configured (or
filtered) on that name keeps catching every view's warnings.
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.store.faults import is_wrong_type
from cogworker_async.store.replies import loose_text, text

log = logging.getLogger(__name__.rpartition(".")[0])

_SCAN_COUNT = 500
_GLOB_SPECIAL = frozenset("*?[]\\")


def _is_wrong_type(exc: BaseException) -> bool:
    return is_wrong_type(exc)


async def _warn_wrong_type(redis: Redis, key: str, expected: str, consequence: str) -> None:
    found = text(await redis.type(key))
    log.warning(
        "%s holds a %s, not a %s: %s (a worker's key guard moves it to quarantine)",
        key,
        found,
        expected,
        consequence,
    )


async def _set_members(redis: Redis, key: str, consequence: str) -> list[str]:
    """The members of set ``key``, sorted; empty (with a warning) if it has the wrong type."""
    try:
        members = await redis.smembers(key)
    except ResponseError as exc:
        if not _is_wrong_type(exc):
            raise
        await _warn_wrong_type(redis, key, "set", consequence)
        return []
    return sorted(loose_text(m) for m in members)


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in _GLOB_SPECIAL else ch for ch in text)
