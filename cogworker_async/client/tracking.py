"""Job status and kept results: what ``Client.status`` and ``Client.result`` read.

Both are opt-in per job (``@job(status=True, keep_result=600)``, or
``.options(...)``) or for every job by setting (``status_tracking``,
``keep_result``); a job that uses neither costs no Redis call and no write.

**Status** (``<ns>:status:<jid>``, a hash with a TTL of ``status_ttl``): the
client writes ``queued`` or ``scheduled``, the worker ``working``, then
``complete``, ``retrying`` (in the retry set), ``dead`` (in the dead set) or
``failed`` (failed and discarded: ``retry=False`` or ``retry_in`` said so).
Every write is best-effort (the seeds' ``BestEffort`` rule): sent by a task of
its own, bounded by ``STATUS_WRITE_TIMEOUT``, failures logged once per episode;
it never fails nor delays the job. The client's write sets ``state`` only if
the hash has none yet (``HSETNX``), so a worker's quicker ``working`` is never
overwritten by a late ``queued``; a job's worker writes go in order (each
waits for the one before).

**Results** (``<ns>:result:<jid>``, a one-element list with a TTL of
``keep_result``): the JSON envelope ``{"ok": true, "value": ...}`` or, for a
job that failed terminally (dead or discarded), ``{"ok": false,
"error_class": ..., "error_message": ...}``. A waiter blocks on it with
``BLMOVE key key`` (moving the only element onto itself: read, never
consumed, so any number of waiters see it), so waiting is one blocking read,
never a poll, and it works before the job is even fetched. Beside it,
``<ns>:result_gone:<jid>`` lives a day longer: a waiter that finds it without
the result raises ``ResultExpired`` rather than waiting out its timeout.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async.errors import JobAborted, JobFailed, ResultExpired, ResultTimeout
from cogworker_async.keys import Keys
from cogworker_async.store.faults import FailureLog

STATUS_WRITE_TIMEOUT = 5.0  # s: a status write still out then is dropped (logged)
MAX_STATUS_WRITES = 10_000  # in flight per writer; beyond, writes are dropped (logged)
RESULT_GONE_FOR = 24 * 3600  # s the "it finished" marker outlives the result

ABORTED = "JobAborted"  # the error_class of an aborted job's result envelope

STATES = ("queued", "scheduled", "working", "retrying", "complete", "failed", "dead", "aborted")

_log = logging.getLogger("cogworker_async.tracking")


@dataclass(frozen=True, slots=True)
class JobStatus:
    """One job's status as last written (``Client.status``)."""

    jid: str
    state: str
    job_class: str | None = None
    queue: str | None = None
    enqueued_at: float | None = None
    run_at: float | None = None  # scheduled or retrying: when it is due
    started_at: float | None = None
    finished_at: float | None = None
    updated_at: float | None = None
    retry_count: int | None = None
    error_class: str | None = None
    error_message: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def _float(value: bytes | None) -> float | None:
    return None if value is None else float(value)


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


async def read_status(redis: Redis, keys: Keys, jid: str) -> JobStatus | None:
    """The job's status, or None when none is kept (not tracked, unknown, or expired)."""
    fields: dict[bytes, bytes] = await redis.hgetall(keys.status(jid))  # type: ignore[assignment]
    state = fields.get(b"state")
    if state is None:
        return None
    count = fields.get(b"retry_count")
    return JobStatus(
        jid=jid,
        state=state.decode(),
        job_class=_text(fields.get(b"class")),
        queue=_text(fields.get(b"queue")),
        enqueued_at=_float(fields.get(b"enqueued_at")),
        run_at=_float(fields.get(b"run_at")),
        started_at=_float(fields.get(b"started_at")),
        finished_at=_float(fields.get(b"finished_at")),
        updated_at=_float(fields.get(b"updated_at")),
        retry_count=None if count is None else int(count),
        error_class=_text(fields.get(b"error_class")),
        error_message=_text(fields.get(b"error_message")),
    )


class StatusWriter:
    """Best-effort status writes: each one a task of its own, bounded, never awaited
    by the job; failures logged once per episode (``FailureLog``)."""

    def __init__(self, redis: Redis, keys: Keys, ttl: float, logger: logging.Logger) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl = max(1, math.ceil(ttl))
        self._failures = FailureLog("Status", logger)
        self._tasks: set[asyncio.Task[None]] = set()

    def write(
        self,
        jid: str,
        fields: dict[str, Any],
        *,
        initial: bool = False,
        after: asyncio.Task[None] | None = None,
    ) -> asyncio.Task[None] | None:
        """Send one write in the background; ``after``: a write of the same job to land
        first. ``initial``: the client's first word, set only if no state is there."""
        if len(self._tasks) >= MAX_STATUS_WRITES:
            self._failures.failed(RuntimeError("too many status writes in flight: dropped"))
            return None
        task = asyncio.get_running_loop().create_task(self._write(jid, fields, initial, after))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _write(
        self,
        jid: str,
        fields: dict[str, Any],
        initial: bool,
        after: asyncio.Task[None] | None,
    ) -> None:
        sent = time.monotonic()
        try:
            async with asyncio.timeout(STATUS_WRITE_TIMEOUT):
                if after is not None and not after.done():
                    await asyncio.wait([after])
                key = self._keys.status(jid)
                pipe = self._redis.pipeline(transaction=False)
                if initial:
                    state = fields.pop("state")
                    pipe.hsetnx(key, "state", state)
                pipe.hset(key, mapping={k: _field(v) for k, v in fields.items()})
                pipe.expire(key, self._ttl)
                await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - best effort: logged, never the job's failure
            self._failures.failed(exc)
        else:
            self._failures.succeeded(sent)

    async def drain(self, timeout: float = STATUS_WRITE_TIMEOUT) -> None:  # noqa: ASYNC109 - the API peers use
        """Wait (bounded) for the writes still out: before closing the connection."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)


def _field(value: Any) -> str | int | float:
    if isinstance(value, int | float | str):
        return value
    return str(value)


# --- results ------------------------------------------------------------------


def encode_success(value: Any) -> bytes:
    """The envelope of a returned value; raises ``TypeError`` if it is not JSON."""
    return orjson.dumps({"ok": True, "value": value})


def encode_failure(error_class: str, error_message: str) -> bytes:
    return orjson.dumps({"ok": False, "error_class": error_class, "error_message": error_message})


async def store_result(redis: Redis, keys: Keys, jid: str, envelope: bytes, ttl: float) -> None:
    """Keep one envelope for ``ttl`` s, and the marker that outlives it (one round trip)."""
    seconds = max(1, math.ceil(ttl))
    key = keys.result(jid)
    pipe = redis.pipeline(transaction=True)  # a waiter never sees half of it
    pipe.delete(key)
    pipe.rpush(key, envelope)
    pipe.expire(key, seconds)
    pipe.set(keys.result_gone(jid), b"1", ex=seconds + RESULT_GONE_FOR)
    await pipe.execute()


def _open(jid: str, envelope: bytes) -> Any:
    decoded = orjson.loads(envelope)
    if decoded.get("ok"):
        return decoded.get("value")
    error_class = str(decoded.get("error_class"))
    error = JobAborted if error_class == ABORTED else JobFailed
    raise error(jid, error_class, str(decoded.get("error_message")))


async def wait_result(
    redis: Redis,
    keys: Keys,
    jid: str,
    timeout: float | None,  # noqa: ASYNC109 - a deadline spread over blocking reads
    *,
    chunk: float,
) -> Any:
    """The job's returned value, waiting up to ``timeout`` s (None: for ever).

    Raises ``JobFailed`` (it failed terminally), ``ResultTimeout``, or
    ``ResultExpired`` (it finished but its result is gone). Blocks in reads of
    at most ``chunk`` s (below the socket timeout), never polls.
    """
    key, gone = keys.result(jid), keys.result_gone(jid)
    pipe = redis.pipeline(transaction=False)
    pipe.lindex(key, 0)
    pipe.exists(gone)
    found, finished = await pipe.execute()
    if found is not None:
        return _open(jid, found)
    if finished:
        raise ResultExpired(f"job {jid} finished but its result is no longer kept")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = chunk if deadline is None else min(chunk, deadline - time.monotonic())
        if left <= 0:
            break
        # BLMOVE onto itself: the one element stays for every other waiter.
        found = await redis.execute_command(  # type: ignore[no-untyped-call]
            "BLMOVE", key, key, "RIGHT", "RIGHT", round(max(left, 0.01), 3)
        )
        if found is not None:
            return _open(jid, found)
    if await redis.exists(gone):
        raise ResultExpired(f"job {jid} finished but its result is no longer kept")
    raise ResultTimeout(f"no result for job {jid} within {timeout} s")
