"""Filing failed jobs: retry with backoff, dead when out of retries, or discard.

A filing whose Redis call fails, for whatever reason (an outage, ``OOM``,
``NOPERM``, a wrong-typed retry or dead set, any other error), is kept
*pending* in memory and finished later by reconciliation: a job that ran is
never run again because settling it failed, and a failure to file one job
never reaches the processor, so the other jobs and the worker go on. After an
outage a pending filing is tried on every reconcile pass; after any other
error, with a back-off (``RETRY_FIRST`` doubling to ``RETRY_MAX``), so a
refusal that lasts is not hammered. Repeated failures are logged once per
episode, and a ``WRONGTYPE`` reply wakes the key guard. A shutdown that still
can't file one leaves it on the in-progress list (kept, never requeued), where
recovery will find it.

Here the filings are built; ``filing_calls.py`` sends them and keeps the
pending ones, ``retry_rules.py`` holds the rules they are built by.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async import holds, payload
from cogworker_async.errors import ResultNotJSON, UnknownJob
from cogworker_async.jobs import JobFunction, RetryDecision, RetryIn
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store.commands import Filing
from cogworker_async.store.faults import FailureLog
from cogworker_async.timing import MAX_DURATION, retry_backoff
from cogworker_async.unique.releases import DeferredReleases
from cogworker_async.worker.backtraces import backtrace_frames, format_backtrace
from cogworker_async.worker.failure_log import log_failure
from cogworker_async.worker.filing_calls import (
    DUPLICATE_WARNING,
    RETRY_FIRST,
    RETRY_MAX,
    FilingCalls,
)
from cogworker_async.worker.retry_rules import (
    arguments_misfit,
    error_class_name,
    next_retry_count,
    retry_limit,
)

# Importable from here as before (tracking.py, the tests).
__all__ = [
    "DUPLICATE_WARNING",
    "RETRY_FIRST",
    "RETRY_MAX",
    "Settler",
    "error_class_name",
    "next_retry_count",
    "retry_limit",
]


class Settler(FilingCalls):
    """Builds and files failure records; keeps the ones Redis refused for later."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        settings: Settings,
        *,
        identity: str,
        logger: logging.Logger,
        rng: random.Random,
        on_wrong_type: Callable[[], None] | None = None,
        listed: bool = True,
    ) -> None:
        """``listed``: False in basic fetch, where a job is on no in-progress list."""
        self._redis = redis
        self._listed = listed
        self._keys = keys
        self._settings = settings
        self._identity = identity
        self._log = logger
        self._rng = rng
        self.pending: dict[bytes, Filing] = {}
        # Pending filings refused by a non-outage error: raw → (next try, back-off).
        self._backoff: dict[bytes, tuple[float, float]] = {}
        self._failures = FailureLog("Filing", logger, on_wrong_type=on_wrong_type)
        self.duplicates_suspected = 0
        self._unflushed_duplicates = 0
        # Where a discarded job's lock (unique or periodic) goes when its filing
        # is dropped at shutdown (set by the worker; a discard filed normally releases in-script).
        self.releases: DeferredReleases | None = None

    def failure_filing(
        self,
        raw: bytes,
        job: dict[str, Any],
        exc: BaseException,
        function: JobFunction[Any, Any] | None = None,
    ) -> Filing:
        """The filing of a failed job: its retry, its dead entry, or its discard.

        ``function`` is the handler registered under the job's name (None when
        there is none): its options stand in for those the payload lacks.
        With the metrics history on, the filing counts it under its name.
        """
        return self._filing_of(raw, job, exc, function, self._trace(exc))[0]

    def failed(
        self,
        raw: bytes,
        job: dict[str, Any],
        exc: BaseException,
        function: JobFunction[Any, Any] | None,
        elapsed: float,
    ) -> Filing:
        """``failure_filing``, and the attempt's one log line with its traceback
        (formatted once, for the line and the entry alike)."""
        trace = self._trace(exc)
        filing, failed, outcome = self._filing_of(raw, job, exc, function, trace)
        log_failure(
            self._log,
            failed,
            elapsed=elapsed,
            outcome=outcome,
            terminal=filing.target != self._keys.retry,
            trace=trace,
        )
        return filing

    def _trace(self, exc: BaseException, frames: int | None = None) -> str | None:
        settings = self._settings
        try:
            return format_backtrace(
                exc,
                frames=settings.error_backtrace_frames if frames is None else frames,
                max_chars=settings.error_backtrace_max,
            )
        except Exception as error:  # noqa: BLE001 - an odd exception must not stop its filing
            self._log.error("could not format a failure's traceback (%r): filed without", error)
            return None

    def _filing_of(
        self,
        raw: bytes,
        job: dict[str, Any],
        exc: BaseException,
        function: JobFunction[Any, Any] | None,
        trace: str | None,
    ) -> tuple[Filing, dict[str, Any], str]:
        """The filing, the job as filed, and what happens to it (for the log line)."""
        filing, failed, outcome = self._failure_filing(raw, job, exc, function, trace)
        if self._settings.metrics_history:
            filing = replace(filing, counted=str(job.get("class", "")))
        # What the job holds goes with the filing, settled in its step as each
        # kind's rule for it says (a retry keeps them while it waits).
        job_holds = holds.read(job, self._keys)
        return (replace(filing, holds=job_holds) if job_holds else filing), failed, outcome

    def _failure_filing(
        self,
        raw: bytes,
        job: dict[str, Any],
        exc: BaseException,
        function: JobFunction[Any, Any] | None,
        trace: str | None,
    ) -> tuple[Filing, dict[str, Any], str]:
        now = time.time()
        limit = retry_limit(job, self._settings, function.defaults.retry if function else None)
        retry_in = function.retry_in if function is not None else None
        if function is None and isinstance(exc, UnknownJob) and limit is not None:
            # No handler appears by retrying, unless a deploy is rolling out
            # the one that knows it: unknown_job_retries (0 by default). (A
            # handler of ours raising UnknownJob itself keeps its retries.)
            limit = min(limit, self._settings.unknown_job_retries)
        if isinstance(exc, ResultNotJSON) and limit is not None:
            # The handler ran and succeeded: running it again for a result it
            # cannot store would repeat its work. Filed dead, the error saying why.
            limit = 0
        misfit = arguments_misfit(job, exc, function)
        if misfit is not None and limit is not None:
            # Arguments that do not fit the handler (an older client, an enqueue
            # by name) fit no better on a retry: straight to dead, said once.
            limit = 0
            self._log.warning("jid=%s: %s: buried in dead, not retried", job.get("jid"), misfit)
        count = next_retry_count(job)
        job = dict(job)
        job.pop("suspect", None)  # it failed by itself: its retry needn't run alone
        message = misfit or str(exc) or repr(exc)
        job["error_class"] = error_class_name(exc)
        job["error_message"] = message[: self._settings.error_message_max]
        if "failed_at" in job:
            job["retried_at"] = now
        else:
            job["failed_at"] = now
        job["retry_count"] = count
        self._keep_backtrace(job, exc, function, trace)
        if limit is None:
            discard = Filing(raw, str(job.get("jid", "")), None, now, b"")
            return discard, job, "discarded (retry=False), not run again"
        if count >= limit:
            tries = f"{count + 1} tr{'y' if count == 0 else 'ies'}"
            return self._dead(raw, job, now), job, f"buried in dead after {tries}"
        decision = self._ask(retry_in, count, exc, job)
        if decision == "discard":
            discard = Filing(raw, str(job.get("jid", "")), None, now, b"")
            return discard, job, "discarded (retry_in said so), not run again"
        if decision == "dead":
            return self._dead(raw, job, now), job, "buried in dead (retry_in said so)"
        delay = retry_backoff(count, self._rng) if decision is None else float(decision)
        retry = Filing(
            raw,
            str(job["jid"]),
            self._keys.retry,
            now + delay,
            orjson.dumps(job),
        )
        return retry, job, f"retry {count + 1} of {limit} in {delay:.0f} s"

    def _dead(self, raw: bytes, job: dict[str, Any], now: float) -> Filing:
        entry = orjson.dumps(job)
        return Filing(raw, str(job["jid"]), self._keys.dead, now, entry)

    def _keep_backtrace(
        self,
        job: dict[str, Any],
        exc: BaseException,
        function: JobFunction[Any, Any] | None,
        trace: str | None,
    ) -> None:
        """The entry's ``error_backtrace``: this failure's (an earlier one's never
        stays), unless the job opted out (its ``backtrace`` option, Sidekiq's)."""
        job.pop("error_backtrace", None)
        option = job.get("backtrace")
        if option is None and function is not None:
            option = function.defaults.backtrace
        default = self._settings.error_backtrace_frames
        frames = backtrace_frames(option, default)
        if frames is None:
            return
        kept = trace if frames == default else self._trace(exc, frames)
        if kept is not None:
            job["error_backtrace"] = kept

    def _ask(
        self, retry_in: RetryIn | None, count: int, exc: BaseException, job: dict[str, Any]
    ) -> RetryDecision:
        if retry_in is None:
            return None
        try:
            decision = retry_in(count, exc, job)
        except Exception:  # noqa: BLE001 - a user hook's bug must not lose the job
            self._log.exception("jid=%s: retry_in raised: using the default backoff", job["jid"])
            return None
        if decision in ("discard", "dead") or decision is None:
            return decision
        if (
            isinstance(decision, int | float)
            and not isinstance(decision, bool)
            and 0 <= decision <= MAX_DURATION
        ):
            return decision
        self._log.error(
            "jid=%s: retry_in returned %r: using the default backoff", job["jid"], decision
        )
        return None

    def unparseable_filing(self, raw: bytes, reason: str) -> Filing:
        entry = payload.unparseable_entry(raw, reason)
        counted = "" if self._settings.metrics_history else None
        return Filing(raw, "", self._keys.dead, time.time(), entry, counted)

    def aborted_filing(self, raw: bytes, job: dict[str, Any]) -> Filing:
        """The settlement of a job aborted here: off the list, counted, not retried,
        its holds (unique lock, periodic running lock, ...) settled in the same step."""
        job_holds = holds.read(job, self._keys)
        return Filing(raw, str(job["jid"]), None, time.time(), b"", aborted=True, holds=job_holds)
