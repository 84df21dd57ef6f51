"""Batches for people (the ``batches`` commands, the web UI's Batches page): the
recent ones, and one in full. A key of the wrong type reads as no batch (named
in a warning); a count written by hand reads as 0."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.api._common import log
from cogworker_async.keys import Keys
from cogworker_async.store import batches

SHOWN_PENDING = 100  # pending members ``show`` lists


async def list_batches(redis: Redis, keys: Keys, limit: int = 50) -> list[dict[str, Any]]:
    """The newest ``limit`` batches, each as ``Client.batch_status`` reports it."""
    try:
        return await batches.recent_batches(redis, keys, limit)
    except ResponseError as exc:  # a key of the wrong type: none readable
        log.warning("batches: %s", exc)
        return []


async def show_batch(redis: Redis, keys: Keys, bid: str) -> dict[str, Any] | None:
    """One batch's status plus up to ``SHOWN_PENDING`` of its pending members
    (jids; ``b:<bid>`` a child batch); None when there is no such batch."""
    try:
        status = await batches.batch_status(redis, keys, bid)
        if status is None:
            return None
        status["pending_members"] = await batches.pending_members(redis, keys, bid, SHOWN_PENDING)
    except ResponseError as exc:  # a key of the wrong type
        log.warning("batch %s: %s", bid, exc)
        return None
    return status
