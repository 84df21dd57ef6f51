"""The worker's side of status and results (the writes are ``store/status_writes.py``
and ``store/results.py``).

Only a job that asks (its payload's ``status`` / ``keep_result``, its
registered job's options, or the settings) comes here: the processor's plain
path pays one flag check. Status writes are best-effort (they never fail the
job). The ``working`` write rides the fetcher's next call (``Start``, never
awaited), written there unless the hash already says this run's end (calls
go on several connections). A success's result and final status ride its
ack (``End``, written by ``includes/acked_ends.lua`` in the step that
removes the job from the in-progress list), so a waiter that sees the job
gone sees its result, and the worker pays no round trip per job for them. A
failure's end (rare) is written before its filing, as before. A Redis error writing a result is
logged (once per episode) and the job still succeeds: it ran, and running it
again for its result would be worse.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.errors import ResultNotJSON
from cogworker_async.jobs import JobFunction
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import results
from cogworker_async.store.commands import End, Filing, Start
from cogworker_async.store.faults import FailureLog
from cogworker_async.store.status import NO_PROGRESS
from cogworker_async.store.status_writes import STATUS_WRITE_TIMEOUT, StatusWriter
from cogworker_async.worker.progress import ProgressWriter
from cogworker_async.worker.settlement import next_retry_count

Function = JobFunction[Any, Any] | None

# A retry's first write clears its last try's progress (``NO_PROGRESS``), flat.
_NO_PROGRESS_FLAT = tuple(x for pair in NO_PROGRESS.items() for x in pair)


class Tracker:
    """Status writes and kept results for the jobs that ask for them."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        settings: Settings,
        logger: logging.Logger,
        on_wrong_key: Callable[[str], None] | None = None,
    ) -> None:
        self._keys = keys
        self._all_status = settings.status_tracking
        self._all_keep = settings.keep_result
        # Read by the processor on every job: True when every job is tracked.
        self.all = bool(settings.status_tracking or settings.keep_result)
        self._message_max = settings.error_message_max
        self.status = StatusWriter(
            redis, keys, settings.status_ttl, logger, on_wrong_key=on_wrong_key
        )
        # current_job().progress() of the running jobs that track status.
        self.progress = ProgressWriter(self.status)
        self._failures = FailureLog("Result", logger)
        # Hands a "working" write to the fetcher, to ride its next call (set by
        # the processors).
        self.send_start: Callable[[Start], None] | None = None
        # Takes a job's "working" write back while it still waits (the end writes
        # both fields at once: a short job pays one status write, not two).
        self.take_start: Callable[[str], Start | None] | None = None
        # slot -> the job's "working" write (when sent on its own), which its
        # final write waits for.
        self._working: dict[int, asyncio.Task[None]] = {}
        # keep_result -> (the one-key result's TTL, its gone_for), s.
        self._ttls: dict[float, tuple[int, int]] = {}

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

    def started(
        self,
        slot: int,
        job: dict[str, Any],
        function: Function,
        started: float,
        wants: bool | None = None,
    ) -> None:
        """Say ``working`` (``wants``: ``wants_status``, when the caller asked already)."""
        if not (self.wants_status(job, function) if wants is None else wants):
            return
        # As strings, as redis-py would send them (one float formatted, not two).
        at = str(started)
        jid = str(job["jid"])
        if self.send_start is not None:
            # Flat, name then value, as the ack's step sends them to HSET: an end
            # that finds it still waiting (most do) edits it in place (``_final``).
            flat = [
                "state", "working",
                "class", job["class"],
                "queue", job["queue"],
                "started_at", at,
                "updated_at", at,
                "retry_count", str(job.get("retry_count", 0)),
            ]  # fmt: skip
            if "retry_count" in job:  # a retry: its last try's progress is not this one's
                flat.extend(_NO_PROGRESS_FLAT)
            self.send_start(Start(jid, flat, started, self.status.ttl))
            self.progress.begin(jid, None)
            return
        fields = {
            "state": "working",
            "class": job["class"],
            "queue": job["queue"],
            "started_at": at,
            "updated_at": at,
            "retry_count": str(job.get("retry_count", 0)),
        }
        if "retry_count" in job:
            fields.update(NO_PROGRESS)
        task = self.status.write(jid, fields)
        if task is not None:
            self._working[slot] = task
        self.progress.begin(jid, task)

    def ends_failed(self, failures: list[tuple[str, str]]) -> None:
        """Writes the fetcher's calls could not make: a result's is the job's
        result lost (logged), a status's a status write's failure."""
        for key, error in failures:
            if key.startswith(self._keys.result("")):
                self._failures.failed(ResponseError(error))
            else:
                self.status.report(key, error)

    def success_end(
        self,
        slot: int,
        job: dict[str, Any],
        function: Function,
        value: Any,
        wants: bool | None = None,
    ) -> End | None:
        """A success's result and final status as its ack writes them (``End``; None
        when it keeps neither); raises ``ResultNotJSON`` (the job's failure). The
        job's ``working`` write rode a fetch (``Start``): written only if it lands
        before this end, so no wait. ``wants``: ``wants_status``, if asked already."""
        jid = str(job["jid"])
        if wants is None:
            wants = self.wants_status(job, function)
        progress = None
        if wants:
            # The progress still waiting goes with the final status (first: an
            # unstorable result below is this job's end too). A job that tracks
            # no status began none.
            _, progress = self.progress.finish(jid, self._working.pop(slot, None))
        keep = self.keep_for(job, function)
        if keep is None:
            envelope, result_ttl = b"", 0
        else:  # the one-key shape: its key outlives the keeping by gone_for s
            result_ttl, gone_for = self._one_key_ttls(keep)
            envelope = self._encode(job, value, gone_for)
        if wants:
            status = self._final(jid, progress)
        elif keep is None:
            return None
        else:
            status = b""
        return End(jid, status, self.status.ttl, envelope, result_ttl)

    def _final(self, jid: str, progress: dict[str, Any] | None) -> bytes:
        """A success's final status fields, flat (``store.commands.status_json``'s
        form): its ``working`` write's, edited, when that still waits (most do:
        then one write says both), else only what changed."""
        now = str(time.time())  # as status_json would send it, formatted once
        waiting = None if self.take_start is None else self.take_start(jid)
        if waiting is not None and isinstance(waiting.fields, list):
            flat = waiting.fields  # taken: nobody else reads it now
            flat[1] = "complete"  # "state" (see ``started``)
            flat[9] = now  # "updated_at"
            flat += ("finished_at", now)
        else:
            flat = ["state", "complete", "finished_at", now, "updated_at", now]
        if progress is not None:
            # After the fields it may repeat (a retry's cleared progress): the
            # script's HSET sets them in order, the last one stands.
            for name, field in progress.items():
                flat += (name, field if isinstance(field, str) else str(field))
        return orjson.dumps(flat)

    def _one_key_ttls(self, keep: float) -> tuple[int, int]:
        """A one-key result's TTL (the keeping and gone_for) and its gone_for, in s
        (``store/results.py``); computed once per ``keep`` (a job's few values)."""
        ttls = self._ttls.get(keep)
        if ttls is None:
            if len(self._ttls) >= 64:  # payloads may each name their own: bounded
                self._ttls.clear()
            seconds, marker = results.result_ttls(keep)
            ttls = self._ttls[keep] = (marker, marker - seconds)
        return ttls

    def _success_envelope(
        self, job: dict[str, Any], function: Function, value: Any
    ) -> bytes | None:
        if self.keep_for(job, function) is None:
            return None
        return self._encode(job, value)

    @staticmethod
    def _encode(job: dict[str, Any], value: Any, gone_for: int = 0) -> bytes:
        try:
            return results.encode_success(value, gone_for=gone_for)
        except (TypeError, ValueError) as exc:
            # Filed dead by the settler (never retried: the handler succeeded).
            raise ResultNotJSON(
                f"{job['class']} returned {type(value).__name__}, which is not JSON "
                f"(it keeps its result; the argument rule applies): {exc}"
            ) from None

    async def succeeded(
        self, slot: int, job: dict[str, Any], function: Function, value: Any
    ) -> None:
        """Keep the result (raises ``ResultNotJSON``: the job's failure), say complete,
        before the ack (basic fetch, whose ack carries no end: ``success_end``)."""
        envelope = self._success_envelope(job, function, value)
        keep = self.keep_for(job, function) if envelope else None
        fields = None
        if self.wants_status(job, function):
            now = time.time()
            fields = {"state": "complete", "finished_at": now, "updated_at": now}
        await self._end(slot, job, fields, envelope, keep)

    async def failed(
        self,
        slot: int,
        job: dict[str, Any],
        function: Function,
        exc: BaseException,
        filing: Filing,
    ) -> None:
        """Say retrying, dead or failed (discarded); keep a terminal failure for waiters."""
        error_class = type(exc).__name__
        message = (str(exc) or repr(exc))[: self._message_max]
        terminal = filing.target is None or filing.target == self._keys.dead
        fields: dict[str, Any] | None = None
        if self.wants_status(job, function):
            now = time.time()
            fields = {
                "error_class": error_class,
                "error_message": message,
                "updated_at": now,
                # As the filed entry says (and the UI shows it): the index of this failure.
                "retry_count": next_retry_count(job),
            }
            if filing.target is None:
                fields.update(state="failed", finished_at=now)
            elif terminal:
                fields.update(state="dead", finished_at=now)
            else:
                fields.update(state="retrying", run_at=filing.score)
        keep = self.keep_for(job, function) if terminal else None
        envelope = None if keep is None else results.encode_failure(error_class, message)
        await self._end(slot, job, fields, envelope, keep)

    async def aborted(self, slot: int, job: dict[str, Any], function: Function) -> None:
        """Say aborted; its result waiters hear ``JobAborted``."""
        fields = None
        if self.wants_status(job, function):
            now = time.time()
            fields = {"state": "aborted", "finished_at": now, "updated_at": now}
        keep = self.keep_for(job, function)
        envelope = None
        if keep is not None:
            envelope = results.encode_failure(results.ABORTED, "aborted while it ran")
        await self._end(slot, job, fields, envelope, keep)

    async def _end(
        self,
        slot: int,
        job: dict[str, Any],
        fields: dict[str, Any] | None,
        envelope: bytes | None,
        keep: float | None,
    ) -> None:
        """Write a job's end: its status alone in the background (best effort), or
        with its result in one ``MULTI``, so whoever reads the result then reads the
        final status too (``status`` right after ``result()`` says complete)."""
        jid = str(job["jid"])
        # After its last progress write, if any; the progress still waiting goes with it.
        after, progress = self.progress.finish(jid, self._working.pop(slot, None))
        if progress is not None and fields is not None:
            fields.update(progress)
        if envelope is None or keep is None:
            if fields is not None:
                self.status.write(jid, fields, after=after)
            return
        sent = time.monotonic()
        try:
            async with asyncio.timeout(STATUS_WRITE_TIMEOUT):
                if after is not None and not after.done():
                    # Its "working" lands first (bounded by its own timeout).
                    await asyncio.wait([after])
                await self.status.write_with_result(jid, fields, envelope, keep)
        except Exception as exc:  # noqa: BLE001 - the job ran; its result is what is lost
            self._failures.failed(exc)
        else:
            self._failures.succeeded(sent)
