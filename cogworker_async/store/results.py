"""Kept results, written: the envelope, its TTLs and the ``MULTI`` that keeps it.

A result (``<ns>:result:<jid>``, a one-element list with a TTL of
``keep_result``) is the JSON envelope ``{"ok": true, "value": ...}`` or
``{"ok": false, "error_class": ..., "error_message": ...}``; beside it
``<ns>:result_gone:<jid>`` outlives it by as long again (at most a day), and
the jid's channel (``<ns>:result_ready:<jid>``) is published in the same step.
The client (an abort before the run) and the worker (a job's end) both write
here; the waiting side is ``client/results.py`` and ``client/waiters.py``.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterPipeline

from cogworker_async import payload
from cogworker_async.keys import Keys
from cogworker_async.timing import MAX_DURATION

RESULT_GONE_FOR = 24 * 3600  # s at most the "it finished" marker outlives the result

ABORTED = "JobAborted"  # the error_class of an aborted job's result envelope


def encode_success(value: Any, where: str = "the result") -> bytes:
    """The envelope of a returned value; ``TypeError``/``ValueError`` (naming where in
    it) if it is not strict JSON, the argument rule."""
    payload.check_json(value, where)
    return orjson.dumps({"ok": True, "value": value})


def encode_failure(error_class: str, error_message: str) -> bytes:
    return orjson.dumps({"ok": False, "error_class": error_class, "error_message": error_message})


def result_ttls(keep: float) -> tuple[int, int]:
    """Seconds the result and its "gone" marker live: the marker outlives the result
    by as long again, at most ``RESULT_GONE_FOR`` (both within ``MAX_DURATION``)."""
    seconds = max(1, math.ceil(min(keep, MAX_DURATION)))
    return seconds, seconds + min(seconds, RESULT_GONE_FOR)


def queue_result(pipe: Any, keys: Keys, jid: str, envelope: bytes, keep: float) -> None:
    """Add the writes of one envelope to a ``MULTI`` pipeline: the result, its marker,
    and the word to its waiters (``PUBLISH``, in the same step)."""
    seconds, marker = result_ttls(keep)
    key = keys.result(jid)
    pipe.delete(key)
    pipe.rpush(key, envelope)
    pipe.expire(key, seconds)
    pipe.set(keys.result_gone(jid), b"1", ex=marker)
    publish_ready(pipe, keys, jid)


def publish_ready(pipe: Any, keys: Keys, jid: str) -> None:
    """Add the word to the jid's waiters (``PUBLISH`` of its channel) to a pipeline.

    Not on a Redis Cluster: redis-py's cluster pipelines refuse ``PUBLISH``, and
    a cluster's waiters block on the result key itself (``wait_blocking``)."""
    if not isinstance(pipe, ClusterPipeline):
        pipe.publish(keys.result_ready(jid), b"1")


async def store_result(redis: Redis, keys: Keys, jid: str, envelope: bytes, ttl: float) -> None:
    """Keep one envelope for ``ttl`` s (one round trip, one ``MULTI``)."""
    pipe = redis.pipeline(transaction=True)  # a waiter never sees half of it
    queue_result(pipe, keys, jid, envelope, ttl)
    await pipe.execute()
