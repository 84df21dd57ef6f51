"""Kept results: how a Client waits for them (``store/results.py`` writes them).

A result (``<ns>:result:<jid>``, a one-element list with a TTL of
``keep_result``) is the JSON envelope ``{"ok": true, "value": ...}`` or, for a
job that ended without one (dead, discarded, aborted, buried as
``ProcessDied``, killed or deleted by an operator), ``{"ok": false,
"error_class": ..., "error_message": ...}``. The value follows the argument
rule (``payload.check_json``: strict JSON, nothing converted). That the job
finished outlives the result by as long again (at most a day): a waiter that
finds only that raises ``ResultExpired`` rather than waiting out its timeout,
and a short ``keep_result`` leaves no day-long key per job. Two shapes say it
(``store/results.py``): the envelope's own key, in its last ``gone_for`` s
(a success's ack writes one key), or the marker ``<ns>:result_gone:<jid>``
beside the list (the rarer ends, and older workers). A look reads both.

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

import time
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.client.result_checks import finished_unkept, unkept_error
from cogworker_async.errors import (
    JobAborted,
    JobFailed,
    ResultCorrupt,
    ResultExpired,
    ResultTimeout,
)
from cogworker_async.keys import Keys

# The writing side lives in the store (the worker writes results too, and may not
# import the client); imported here, where callers have always found it.
from cogworker_async.store.results import (
    ABORTED,
    RESULT_GONE_FOR,
    encode_failure,
    encode_success,
    expired,
    publish_ready,
    queue_result,
    result_ttls,
    store_result,
)

__all__ = [
    "ABORTED",
    "RESULT_GONE_FOR",
    "encode_failure",
    "encode_success",
    "expired",
    "open_envelope",
    "publish_ready",
    "queue_result",
    "result_ttls",
    "store_result",
    "wait_blocking",
    "wrong_type",
]

_NOTHING = object()  # a look found no result yet


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
    pipe.pttl(key)
    found, finished, state, pttl = await pipe.execute(raise_on_error=False)
    for reply in (found, finished):  # the status's own error says nothing here
        if isinstance(reply, Exception):
            raise reply
    if found is not None and not expired(found, pttl):
        return open_envelope(key, jid, found)
    if finished or found is not None:
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
                continue  # the look above opens it (or finds it past its keeping)
    except ResponseError as exc:
        if str(exc).startswith("WRONGTYPE"):
            raise wrong_type(key, exc) from None
        raise
    raise ResultTimeout(f"no result for job {jid} within {timeout} s")
