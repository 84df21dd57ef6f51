"""A batch's members' results, read in member order, a chunk a round trip.

Each result is stored once, at its member's own result key (``store/results.py``,
as for any job). What a batch adds is the order: ``batch_add.lua`` appends the
jids of the members that keep a result to ``<ns>:batch_results:<bid>`` in the
step that adds them, and ``batch_results.lua`` reads that list and the results
it names, ``RESULTS_CHUNK`` at a time. A chord's callback and
``client.batch_results`` both read here (see ``docs/design.md``, "A batch's
results").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.scripts import script


async def read_result(redis: Redis, keys: Keys, jid: str) -> Any:
    """The value job ``jid`` returned (its kept result's envelope), or None when it
    failed, kept none, or its result is gone (a flow's next stage reads it)."""
    return value_of(await redis.lindex(keys.result(jid), 0))


RESULTS_CHUNK = 1000  # results a batch_results.lua call reads (one round trip)


async def read_results(
    redis: Redis, keys: Keys, bid: str, *, chunk: int = RESULTS_CHUNK
) -> AsyncIterator[list[tuple[str, Any]]]:
    """Batch ``bid``'s members that keep a result, in the order they were added:
    ``(jid, value)`` pairs, ``chunk`` a round trip (value as ``read_result`` gives
    it: None when the member failed, kept none, or its result is gone). Nothing
    when the batch lists none (no member keeps a result, or the batch expired)."""
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1, not {chunk!r}")
    start = 0
    listed = keys.batch_results(bid)
    prefix = keys.result("")
    while True:
        flat = await script("batch_results").run(redis, [listed], [prefix, start, chunk])
        pairs = [(_text(flat[i]), value_of(flat[i + 1])) for i in range(0, len(flat) - 1, 2)]
        if pairs:
            yield pairs
        if len(pairs) < chunk:
            return
        start += chunk


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def value_of(raw: bytes | str | None) -> Any:
    """The value in a result's envelope; None when there is none, it is a failure's,
    or it is not an envelope."""
    if raw is None:
        return None
    try:
        envelope = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(envelope, dict) and envelope.get("ok") is True:
        return envelope.get("value")
    return None
