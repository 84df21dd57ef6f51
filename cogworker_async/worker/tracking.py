"""The worker's side of status and results (``cogworker_async/tracking.py`` has the rest).

Only a job that asks (its payload's ``status`` / ``keep_result``, its
registered job's options, or the settings) comes here: the processor's plain
path pays one flag check. Status writes are best-effort tasks (they never fail
nor delay the job); a result is written before the job is acknowledged, so a
waiter that sees the job gone sees its result, and a Redis error writing it is
logged (once per episode) and the job still succeeds: it ran, and running it
again for its result would be worse.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from cogworker_async.client import tracking
from cogworker_async.errors import ResultNotJSON
from cogworker_async.jobs import JobFunction
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store.commands import Filing
from cogworker_async.store.faults import FailureLog

Function = JobFunction[Any, Any] | None


class Tracker:
    """Status writes and kept results for the jobs that ask for them."""

    def __init__(self, redis: Any, keys: Keys, settings: Settings, logger: logging.Logger) -> None:
        self._redis = redis
        self._keys = keys
        self._all_status = settings.status_tracking
        self._all_keep = settings.keep_result
        # Read by the processor on every job: True when every job is tracked.
        self.all = bool(settings.status_tracking or settings.keep_result)
        self._message_max = settings.error_message_max
        self.status = tracking.StatusWriter(redis, keys, settings.status_ttl, logger)
        self._failures = FailureLog("Result", logger)
        # slot -> the job's "working" write, which its final write waits for.
        self._working: dict[int, asyncio.Task[None]] = {}

    def wants_status(self, job: dict[str, Any], function: Function) -> bool:
        """The payload's own flag, else the registered job's, else the setting."""
        flag = job.get("status")
        if flag is None and function is not None:
            flag = function.defaults.status
        return bool(self._all_status if flag is None else flag)

    def keep_for(self, job: dict[str, Any], function: Function) -> float | None:
        keep = job.get("keep_result")
        if isinstance(keep, int | float) and not isinstance(keep, bool) and keep > 0:
            return float(keep)
        if function is not None and function.defaults.keep_result:
            return function.defaults.keep_result
        return self._all_keep

    def started(self, slot: int, job: dict[str, Any], function: Function, started: float) -> None:
        if not self.wants_status(job, function):
            return
        fields = {
            "state": "working",
            "class": job["class"],
            "queue": job["queue"],
            "started_at": started,
            "updated_at": started,
            "retry_count": job.get("retry_count", 0),
        }
        task = self.status.write(str(job["jid"]), fields)
        if task is not None:
            self._working[slot] = task

    async def succeeded(
        self, slot: int, job: dict[str, Any], function: Function, value: Any
    ) -> None:
        """Keep the result (raises ``ResultNotJSON``: the job's failure), say complete."""
        keep = self.keep_for(job, function)
        if keep is not None:
            try:
                envelope = tracking.encode_success(value)
            except TypeError as exc:
                raise ResultNotJSON(
                    f"{job['class']} returned {type(value).__name__}, which is not JSON "
                    f"(it keeps its result): {exc}"
                ) from None
            await self._store(job, envelope, keep)
        after = self._working.pop(slot, None)
        if self.wants_status(job, function):
            now = time.time()
            self.status.write(
                str(job["jid"]),
                {"state": "complete", "finished_at": now, "updated_at": now},
                after=after,
            )

    async def failed(
        self,
        slot: int,
        job: dict[str, Any],
        function: Function,
        exc: BaseException,
        filing: Filing,
    ) -> None:
        """Say retrying, dead or failed (discarded); keep a terminal failure for waiters."""
        after = self._working.pop(slot, None)
        error_class = type(exc).__name__
        message = (str(exc) or repr(exc))[: self._message_max]
        terminal = filing.target is None or filing.target == self._keys.dead
        if self.wants_status(job, function):
            now = time.time()
            fields: dict[str, Any] = {
                "error_class": error_class,
                "error_message": message,
                "updated_at": now,
            }
            if filing.target is None:
                fields.update(state="failed", finished_at=now)
            elif terminal:
                fields.update(state="dead", finished_at=now)
            else:
                fields.update(state="retrying", run_at=filing.score)
            self.status.write(str(job["jid"]), fields, after=after)
        if terminal:
            keep = self.keep_for(job, function)
            if keep is not None:
                await self._store(job, tracking.encode_failure(error_class, message), keep)

    async def aborted(self, slot: int, job: dict[str, Any], function: Function) -> None:
        """Say aborted; its result waiters hear ``JobAborted``."""
        after = self._working.pop(slot, None)
        if self.wants_status(job, function):
            now = time.time()
            fields = {"state": "aborted", "finished_at": now, "updated_at": now}
            self.status.write(str(job["jid"]), fields, after=after)
        keep = self.keep_for(job, function)
        if keep is not None:
            envelope = tracking.encode_failure(tracking.ABORTED, "aborted while it ran")
            await self._store(job, envelope, keep)

    async def _store(self, job: dict[str, Any], envelope: bytes, keep: float) -> None:
        sent = time.monotonic()
        try:
            async with asyncio.timeout(tracking.STATUS_WRITE_TIMEOUT):
                await tracking.store_result(
                    self._redis, self._keys, str(job["jid"]), envelope, keep
                )
        except Exception as exc:  # noqa: BLE001 - the job ran; its result is what is lost
            self._failures.failed(exc)
        else:
            self._failures.succeeded(sent)
