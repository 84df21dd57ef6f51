"""Kept results: how they are written, and how a Client waits for them.

A result (``<ns>:result:<jid>``, a one-element list with a TTL of
``keep_result``) is the JSON envelope ``{"ok": true, "value": ...}`` or, for a
job that ended without one (dead, discarded, aborted, buried as
``ProcessDied``, killed or deleted by an operator), ``{"ok": false,
"error_class": ..., "error_message": ...}``. The value follows the argument
rule (``payload.check_json``: strict JSON, nothing converted). Beside it,
``<ns>:result_gone:<jid>`` outlives it by as long again (at most a day): a
waiter that finds only the marker raises ``ResultExpired`` rather than waiting
out its timeout, and a short ``keep_result`` leaves no day-long key per job.

Whoever writes an envelope publishes the jid's channel
(``<ns>:result_ready:<jid>``) in the same step (the ack's step publishes
only the channels with a subscriber, asked once per call:
``includes/acked_ends.lua``). All of one Client's waiters share one
connection (``ResultWaiters``): one subscription per awaited jid,
and a look (``LINDEX`` + ``EXISTS`` + ``HGET`` of the status's state) once the
subscription is confirmed and whenever the channel speaks, the looks of one
loop turn in one pipeline. So 10,000 waiters cost one connection, and
enqueueing on the same Client is untouched. A Redis Cluster has no usable
asyncio pub/sub in redis-py: there each waiter blocks in its own ``BLMOVE key
key`` (``wait_blocking``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterPipeline
from redis.exceptions import ResponseError

from cogworker_async import payload
from cogworker_async.client.result_checks import finished_unkept, unkept_error
from cogworker_async.errors import (
    JobAborted,
    JobFailed,
    ResultCorrupt,
    ResultExpired,
    ResultTimeout,
)
from cogworker_async.keys import Keys
from cogworker_async.timing import MAX_DURATION

RESULT_GONE_FOR = 24 * 3600  # s at most the "it finished" marker outlives the result

ABORTED = "JobAborted"  # the error_class of an aborted job's result envelope
_NOTHING = object()  # a look found no result yet


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


def open_envelope(key: str, jid: str, envelope: bytes) -> Any:
    """The value an envelope holds, or the ``JobFailed``/``JobAborted`` it says;
    ``ResultCorrupt`` (naming the key) when it is not an envelope we wrote."""
    try:
        decoded = orjson.loads(envelope)
    except orjson.JSONDecodeError as exc:
        raise ResultCorrupt(f"{key} does not hold a result envelope (not JSON: {exc})") from None
    if not isinstance(decoded, dict) or not isinstance(decoded.get("ok"), bool):
        raise ResultCorrupt(f"{key} does not hold a result envelope: {envelope[:80]!r}")
    if decoded["ok"]:
        return decoded.get("value")
    error_class = str(decoded.get("error_class"))
    error = JobAborted if error_class == ABORTED else JobFailed
    raise error(jid, error_class, str(decoded.get("error_message")))


def wrong_type(key: str, exc: ResponseError) -> ResultCorrupt:
    return ResultCorrupt(f"{key} is not a result list (left as found): {exc}")


async def _look_blocking(redis: Redis, keys: Keys, jid: str, keeps: bool | None) -> Any:
    """One look: the value (or the error its envelope says), an error saying none will
    come, or ``_NOTHING`` (nothing yet)."""
    key, gone = keys.result(jid), keys.result_gone(jid)
    pipe = redis.pipeline(transaction=False)
    pipe.lindex(key, 0)
    pipe.exists(gone)
    pipe.hget(keys.status(jid), "state")
    found, finished, state = await pipe.execute(raise_on_error=False)
    for reply in (found, finished):  # the status's own error says nothing here
        if isinstance(reply, Exception):
            raise reply
    if found is not None:
        return open_envelope(key, jid, found)
    if finished:
        raise ResultExpired(f"job {jid} finished but its result is no longer kept")
    unkept = finished_unkept(state, found, finished)
    if unkept is not None:
        raise unkept_error(jid, unkept, keeps)
    return _NOTHING


async def wait_blocking(
    redis: Redis,
    keys: Keys,
    jid: str,
    timeout: float | None,  # noqa: ASYNC109 - a deadline spread over blocking reads
    *,
    chunk: float,
    keeps: bool | None = None,
) -> Any:
    """A Redis Cluster's wait: ``BLMOVE key key`` (the one element moved onto itself,
    never consumed) in reads of at most ``chunk`` s, on a pooled connection.

    ``keeps`` as for ``ResultWaiters.wait``. Before the first read and after each
    empty one, a look also reads the status (no channel tells of it here): a job
    it says finished with nothing kept ends the wait within a read."""
    key = keys.result(jid)
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            found = await _look_blocking(redis, keys, jid, keeps)
            if found is not _NOTHING:
                return found
            left = chunk if deadline is None else min(chunk, deadline - time.monotonic())
            if left <= 0:
                break
            found = await redis.execute_command(  # type: ignore[no-untyped-call]
                "BLMOVE", key, key, "RIGHT", "RIGHT", round(max(left, 0.01), 3)
            )
            if found is not None:
                return open_envelope(key, jid, found)
    except ResponseError as exc:
        if str(exc).startswith("WRONGTYPE"):
            raise wrong_type(key, exc) from None
        raise
    raise ResultTimeout(f"no result for job {jid} within {timeout} s")
