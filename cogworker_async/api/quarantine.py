"""The quarantine: keys of the wrong type the worker's key guard moved aside
to ``<ns>:quarantine:...``, listed for a human to inspect.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis

from cogworker_async.api._common import _SCAN_COUNT, _glob_escape
from cogworker_async.keys import Keys
from cogworker_async.store.replies import loose_text as _loose_text
from cogworker_async.store.replies import text as _text


@dataclass(frozen=True, slots=True)
class QuarantinedKey:
    """A key the key guard moved aside; ``ttl`` in seconds, None if it has no expiry."""

    key: str
    type: str
    ttl: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def quarantine_list(redis: Redis, keys: Keys) -> list[QuarantinedKey]:
    """Every ``<ns>:quarantine:*`` key, by name (SCAN: never blocks Redis)."""
    pattern = _glob_escape(keys.quarantine("")) + "*"
    names = sorted(
        {_loose_text(k) async for k in redis.scan_iter(match=pattern, count=_SCAN_COUNT)}
    )
    if not names:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.type(name)
            pipe.ttl(name)
        replies = await pipe.execute(raise_on_error=False)
    result = []
    for i, name in enumerate(names):
        kind, ttl = replies[2 * i], replies[2 * i + 1]
        if isinstance(kind, bytes | str) and _text(kind) == "none":
            continue  # expired or deleted since the scan
        result.append(
            QuarantinedKey(
                key=name,
                type=_text(kind) if isinstance(kind, bytes | str) else "unknown",
                ttl=ttl if isinstance(ttl, int) and ttl >= 0 else None,
            )
        )
    return result
