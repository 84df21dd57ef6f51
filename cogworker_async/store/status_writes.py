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
overwritten by a late ``queued``. A worker's ``working`` and a success's end
ride its fetch and ack calls instead (``worker/tracking.py``,
``includes/acked_ends.lua``), the ``working`` skipped when it lands after its
run's end. A finished state written without a result
(``complete``, ``failed``, ``dead``) is published on the jid's result channel,
so a bare jid's waiter hears that none will come (``result_checks``).

**Progress** (``current_job().progress(fraction, message)``, written by
``worker/progress.py``): the fields ``progress`` (0 to 1), ``progress_message``
(empty when none) and ``progress_at`` of the same hash, read as ``Progress``.

**Results** live in ``store/results.py`` (writing, the envelope) and
``client/results.py``, ``client/waiters.py`` (waiting). The reading side of
status is ``store/status.py``; ``client/tracking.py`` names both for callers.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.keys import Keys
from cogworker_async.store.faults import FailureLog, is_wrong_type
from cogworker_async.store.results import publish_ready, queue_result
from cogworker_async.store.status import FINISHED

STATUS_WRITE_TIMEOUT = 5.0  # s: a status write still out then is dropped (logged)
MAX_STATUS_WRITES = 10_000  # in flight per writer; beyond, writes are dropped (logged)


class StatusWriter:
    """Best-effort status writes: each one a task of its own, bounded, never awaited
    by the job; failures logged once per episode (``FailureLog``)."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        ttl: float,
        logger: logging.Logger,
        on_wrong_key: Callable[[str], None] | None = None,
    ) -> None:
        """``on_wrong_key``: told of a status key that said WRONGTYPE (a worker's key
        guard moves it aside; no pass could list every job's status key)."""
        self._redis = redis
        self._keys = keys
        self._ttl = max(1, math.ceil(ttl))
        self._failures = FailureLog("Status", logger)
        self._on_wrong_key = on_wrong_key
        self._tasks: set[asyncio.Task[None]] = set()

    def write(
        self,
        jid: str,
        fields: dict[str, Any],
        *,
        initial: bool = False,
        after: asyncio.Future[None] | None = None,
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
        after: asyncio.Future[None] | None,
    ) -> None:
        sent = time.monotonic()
        key = self._keys.status(jid)
        try:
            async with asyncio.timeout(STATUS_WRITE_TIMEOUT):
                if after is not None and not after.done():
                    await asyncio.wait([after])
                pipe = self._redis.pipeline(transaction=False)
                if initial:
                    state = fields.pop("state")
                    pipe.hsetnx(key, "state", state)
                pipe.hset(key, mapping={k: _field(v) for k, v in fields.items()})
                pipe.expire(key, self._ttl)
                if fields.get("state") in FINISHED:
                    # Finished with no result (one kept is written with its status,
                    # in ``queue``): a bare jid's waiters look again, and hear it.
                    publish_ready(pipe, self._keys, jid)
                await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - best effort: logged, never the job's failure
            self._failures.failed(exc)
            if self._on_wrong_key is not None and is_wrong_type(exc):
                self._on_wrong_key(key)
        else:
            self._failures.succeeded(sent)

    def report(self, key: str, error: str) -> None:
        """A write made elsewhere (a Lua step: ``includes/acked_ends.lua``) failed:
        logged once per episode as this writer's own, a wrong-typed key told."""
        self._failures.failed(ResponseError(error))
        if self._on_wrong_key is not None and "WRONGTYPE" in error:
            self._on_wrong_key(key)

    @property
    def ttl(self) -> int:
        """Seconds a status hash is kept after each write."""
        return self._ttl

    def queue(self, pipe: Any, jid: str, fields: dict[str, Any]) -> None:
        """Add one status write to a pipeline (a ``MULTI`` that also writes the result)."""
        key = self._keys.status(jid)
        pipe.hset(key, mapping={k: _field(v) for k, v in fields.items()})
        pipe.expire(key, self._ttl)

    async def write_with_result(
        self, jid: str, fields: dict[str, Any] | None, envelope: bytes, keep: float
    ) -> None:
        """A job's end with its result: the status (if any) and the result in one
        ``MULTI``, so whoever reads the result then reads the final status too
        (raises what Redis says: the caller logs the result as lost)."""
        pipe = self._redis.pipeline(transaction=True)  # a waiter never sees half
        if fields is not None:
            self.queue(pipe, jid, fields)
        queue_result(pipe, self._keys, jid, envelope, keep)
        await pipe.execute()

    async def drain(self, timeout: float = STATUS_WRITE_TIMEOUT) -> None:  # noqa: ASYNC109 - the API peers use
        """Wait (bounded) for the writes still out: before closing the connection."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)


async def write_status(
    redis: Redis, keys: Keys, jid: str, fields: dict[str, Any], ttl: float
) -> None:
    """One status write, awaited (``HSET`` + ``EXPIRE``, one round trip; raises what
    Redis says): for a caller with no ``StatusWriter`` (a client's abort)."""
    key = keys.status(jid)
    pipe = redis.pipeline(transaction=False)
    pipe.hset(key, mapping={k: _field(v) for k, v in fields.items()})
    pipe.expire(key, max(1, math.ceil(ttl)))
    await pipe.execute()


def _field(value: Any) -> str | int | float:
    if isinstance(value, int | float | str):
        return value
    return str(value)
