"""What a client asks about a job it (or anyone) enqueued: its result, its status,
and its abort."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from cogworker_async.client.aborting import AbortOutcome, abort_job
from cogworker_async.client.handle import JobHandle
from cogworker_async.client.lifecycle import ClientConnection
from cogworker_async.client.result_checks import not_kept
from cogworker_async.client.results import wait_blocking
from cogworker_async.client.tracking import JobStatus, read_status
from cogworker_async.client.waiters import ResultWaiters
from cogworker_async.store.topology import CLUSTER_SCHEMES, scheme_of


class AskingAboutJobs(ClientConnection):
    """``result``, ``status`` and ``abort`` of one job, by its jid or handle."""

    async def result(self, jid: str, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - the API peers use
        """The value job ``jid`` returned, waiting up to ``timeout`` s for it (None: no limit).

        The job must keep its result (``keep_result``). Waiting is a blocking
        read, so it may start before the job is even fetched. Raises
        ``JobFailed`` (with ``error_class``, ``error_message``) if the job
        failed terminally (dead or discarded), ``ResultTimeout`` if none came
        in time, ``ResultExpired`` if it finished but its result is gone
        (``keep_result`` ran out; told apart for as long again, a day at most),
        ``ResultCorrupt`` if the result key holds what no worker wrote.

        ``ResultNotKept`` (a ``ResultTimeout``), at once, when no result will
        ever come: ``jid`` is a ``JobHandle`` of a job that keeps none, or the
        job's status (if tracked) says it finished (``complete``, ``failed``,
        ``dead``) and nothing of a result is kept. A bare jid's payload is not
        read (it may sit anywhere in a queue): without its status, such a wait
        runs out its timeout as before.

        When no live process reads the job's queue (a bare jid: when none runs
        at all), a WARNING says so as the wait starts, and the
        ``ResultTimeout`` names it. The wait goes on all the same, with no
        limit if ``timeout`` is None: a worker that starts later delivers.

        A job that ended without running to its end (buried as ``ProcessDied``,
        killed or deleted by an operator, aborted) gives ``JobFailed``.
        All of a Client's waiters share one connection, made at the first wait
        (on a Redis Cluster each waiter holds a pooled connection instead).
        """
        handle = jid if isinstance(jid, JobHandle) else None
        keeps = None if handle is None else handle.keeps_result
        jid = str(jid)
        if keeps is False:
            raise not_kept(jid, "keeps no result (its payload has no keep_result)")
        if scheme_of(self.settings.redis_url) in CLUSTER_SCHEMES:
            chunk = max(self.settings.socket_timeout / 2, 0.05)

            def wait() -> Awaitable[Any]:
                return wait_blocking(self.redis, self.keys, jid, timeout, chunk=chunk, keeps=keeps)
        else:
            waiters = self._waiters
            if waiters is None:
                waiters = self._waiters = ResultWaiters(self.redis, self.keys, self.settings)

            def wait() -> Awaitable[Any]:
                return waiters.wait(jid, timeout, keeps)

        queue = None if handle is None else handle.queue
        return await self._no_reader.watch(jid, queue, timeout, wait)

    async def status(self, jid: str) -> JobStatus | None:
        """Job ``jid``'s status, or None (not tracked, unknown, or past ``status_ttl``)."""
        return await read_status(self.redis, self.keys, jid)

    async def abort(self, jid: str) -> AbortOutcome:
        """Abort job ``jid``: ``REMOVED`` (it was queued, scheduled or retrying: it never
        runs), ``CANCELLING`` (it runs: its process cancels an ``async def`` at once, or
        files a plain ``def`` as aborted when its thread returns), ``FINISHED`` or
        ``NOT_FOUND``. An aborted job is not retried; its result waiters get
        ``JobAborted``, its status (if tracked) becomes ``aborted``.
        """
        return await abort_job(self.redis, self.keys, self.settings, jid.strip())
