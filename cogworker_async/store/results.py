"""Kept results, written: the envelope, its TTLs and the ``MULTI`` that keeps it.

A result (``<ns>:result:<jid>``, a one-element list) is the JSON envelope
``{"ok": true, "value": ...}`` or ``{"ok": false, "error_class": ...,
"error_message": ...}``, and the jid's channel (``<ns>:result_ready:<jid>``)
is published in the same step. That the job finished outlives the result by
as long again (at most a day), written in one of two shapes, which every
reader accepts (``expired``):

- one key (a success's ack, ``includes/acked_ends.lua``: the hot path): the
  envelope carries ``"gone_for": G`` and its key lives ``keep_result`` + G s;
  in its last G s (its ``PTTL`` at most G s) it says only that the job
  finished. A key fewer per kept result (a new key is most of its cost in
  Redis), at the price of the envelope's bytes kept G s longer.
- two keys (the rarer ends, and workers before the one-key shape): the list
  with a TTL of ``keep_result`` and the marker ``<ns>:result_gone:<jid>``
  beside it, G s longer.

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
# The one-key shape's field: the seconds its key outlives the result's keeping.
GONE_FOR = "gone_for"
GONE_FOR_BYTES = b'"gone_for"'


def encode_success(value: Any, where: str = "the result", *, gone_for: int = 0) -> bytes:
    """The envelope of a returned value; ``TypeError``/``ValueError`` (naming where in
    it) if it is not strict JSON, the argument rule. ``gone_for``: the envelope of
    the one-key shape, whose key outlives its keeping by that many seconds."""
    payload.check_json(value, where)
    if gone_for:
        return orjson.dumps({"ok": True, "value": value, GONE_FOR: gone_for})
    return orjson.dumps({"ok": True, "value": value})


def expired(envelope: bytes, pttl: Any) -> bool:
    """Whether an envelope found in a result key (``PTTL`` ``pttl`` ms, as read
    beside it) is past its keeping: one of the one-key shape is in its key's last
    ``gone_for`` s. One without ``gone_for`` (the two-key shape) is kept while found.
    An envelope that does not decode is not judged here (``open_envelope`` says)."""
    if GONE_FOR_BYTES not in envelope:  # the two-key shape: nothing to decode here
        return False
    try:
        decoded = orjson.loads(envelope)
    except orjson.JSONDecodeError:
        return False
    gone_for = decoded.get(GONE_FOR) if isinstance(decoded, dict) else None
    if not isinstance(gone_for, int) or isinstance(gone_for, bool) or not isinstance(pttl, int):
        return False
    if pttl == -1:  # no TTL (persisted by hand): kept
        return False
    # -2: gone between the read of the envelope and of its TTL, at the end of its life.
    return pttl <= gone_for * 1000


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
