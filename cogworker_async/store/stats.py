"""The stat counters (``<ns>:stat:<name>``) a caller adds to outside a script.

Most counts ride in the script that makes the move they count; these are the
ones counted apart (a recovery pass's, the duplicates a worker noted).
"""

from __future__ import annotations

from redis.asyncio import Redis

from cogworker_async.keys import Keys


async def add_stat(redis: Redis, keys: Keys, name: str, n: int) -> None:
    """Add ``n`` to the stat ``name`` (``INCRBY``; raises what Redis says)."""
    await redis.incrby(keys.stat(name), n)
