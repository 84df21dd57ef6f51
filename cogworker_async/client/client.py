"""``Client``: enqueue jobs now or later, from anywhere.

A job is pushed with one script call (push, list the queue, wake idle
workers); ``enqueue_many`` streams its items, one pipeline per chunk of jobs.
Arguments are checked for JSON at enqueue, so a bad one is a ``TypeError``
here rather than a failure later.

Enqueued by name (``by_name.py``), a job declared in this process takes its
own options; an unknown name goes to the given queue, else ``default``, and
the client says so, and what the live processes suggest is wrong.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from redis.asyncio import Redis

from cogworker_async import payload
from cogworker_async.client.aborting import AbortOutcome, abort_job
from cogworker_async.client.by_name import EnqueuedByName, LiveCheck, named
from cogworker_async.client.enqueue_many import EnqueuedMany, ManyBatch
from cogworker_async.client.tracking import JobStatus, StatusWriter, read_status, wait_result
from cogworker_async.jobs import (
    BoundJob,
    JobArgs,
    JobFunction,
    JobOptions,
    check_timing,
    payload_options,
)
from cogworker_async.keys import Keys
from cogworker_async.middleware import ClientMiddleware, run_client_chain
from cogworker_async.settings import Settings, check_queue_name
from cogworker_async.store import locks
from cogworker_async.store.connection import connect
from cogworker_async.store.scripts import script
from cogworker_async.unique.lock import unique_field

# EnqueuedByName (what enqueue_by_name returns) is part of this module's API.
__all__ = ["AbortOutcome", "Client", "EnqueuedByName", "EnqueuedMany", "JobHandle"]

_log = logging.getLogger("cogworker_async.client")
# Set (only) on what ``_enqueue`` returns for a unique duplicate: the holder's jid.
_HOLDER = "__duplicate_of__"


class JobHandle(str):
    """What ``enqueue`` returns: the jid itself (a ``str``, as before), and a way to
    its result and status.

    ``await handle.result(timeout=10)`` needs the job to keep its result
    (``keep_result``); ``await handle.status()`` needs status tracking.

    A unique job's duplicate is not enqueued: its handle has ``duplicate``
    True and is the *holder's* jid (``holder``), the job already queued or
    running under the same lock, so ``result()`` waits for that one.
    """

    _client: Client
    duplicate: bool

    def __new__(cls, jid: str, client: Client, *, duplicate: bool = False) -> JobHandle:
        handle = super().__new__(cls, jid)
        handle._client = client
        handle.duplicate = duplicate
        return handle

    @property
    def holder(self) -> str | None:
        """The jid holding the unique lock when this enqueue was a duplicate, else None."""
        return str(self) if self.duplicate else None

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        # Pickled or copied (a task queue's args, a cache), it is the jid alone.
        return (str, (str(self),))

    @property
    def jid(self) -> str:
        return str(self)

    async def result(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - the API peers use
        """See ``Client.result``."""
        return await self._client.result(self.jid, timeout=timeout)

    async def status(self) -> JobStatus | None:
        """See ``Client.status``."""
        return await self._client.status(self.jid)

    async def abort(self) -> AbortOutcome:
        """See ``Client.abort``."""
        return await self._client.abort(self.jid)


P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=JobFunction[Any, Any])
F_co = TypeVar("F_co", bound=JobFunction[Any, Any], covariant=True)


class _OptionsOf(Protocol[F_co]):
    """A ``BoundJob`` seen by its job function's type (for ``enqueue_many``'s overload)."""

    @property
    def function(self) -> F_co: ...


Target = JobFunction[Any, Any] | BoundJob[Any, Any] | str


def _resolve(target: Target) -> tuple[str, JobOptions]:
    if isinstance(target, BoundJob):
        return target.name, target.options
    if isinstance(target, JobFunction):
        return target.name, target.defaults
    if isinstance(target, str):
        return target, named(target)[0].options
    raise TypeError(f"expected a @job function, its .options(...) or a job name, got {target!r}")


def _due(options: JobOptions, now: float) -> float | None:
    # JobOptions can be built directly (the CLI does): checked here too, once per call.
    check_timing(options.delay, options.at)
    if options.at is not None:
        at = options.at.timestamp() if isinstance(options.at, datetime) else float(options.at)
        return at if at > now else None
    if options.delay:
        return now + options.delay
    return None


class Client:
    """Enqueues jobs. Use as ``async with Client(settings) as client:`` or call ``close()``."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        redis: Redis | None = None,
        middleware: Sequence[ClientMiddleware] = (),
    ) -> None:
        self.settings = settings or Settings()
        self.keys = Keys(self.settings.namespace)
        self._own_redis = redis is None
        self.redis = redis if redis is not None else connect(self.settings)
        self.middleware = list(middleware)
        self._batch: dict[str, list[tuple[bytes, asyncio.Future[None]]]] = {}
        self._flush_started = False
        self._flushes: set[asyncio.Task[None]] = set()
        # Enqueue by name only: what the live processes say, and what was said.
        self._live = LiveCheck(
            self.redis, self.keys, heartbeat_interval=self.settings.heartbeat_interval
        )
        self._schedule_keys = [self.keys.schedule, self.keys.schedule_wakeup]
        self._status: StatusWriter | None = None  # made by the first job that tracks it

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._status is not None:
            await self._status.drain()
        if self._own_redis:
            await self.redis.aclose()

    async def _build(
        self, target: Target, args: Sequence[Any], kwargs: Mapping[str, Any], now: float
    ) -> tuple[dict[str, Any] | None, float | None]:
        name, options = _resolve(target)
        due = _due(options, now)
        extra = payload_options(options, self.settings)
        job = payload.build(
            name, args, kwargs, check_queue_name(options.queue), now=now, extra=extra
        )
        if options.unique is not None:
            job["unique"] = unique_field(
                self.keys,
                name=name,
                args=args,
                kwargs=kwargs,
                queue=job["queue"],
                mode=options.unique,
                unique_for=options.unique_for,
                unique_key=options.unique_key,
            )
        if self.middleware:
            # Middleware sees only JSON-safe arguments (checked one by one, so
            # the error names the one at fault).
            payload.ensure_json(args, kwargs)
            job = await run_client_chain(self.middleware, job)  # type: ignore[assignment]
            if job is not None:
                check_queue_name(job.get("queue"))  # a middleware may have changed it
        return job, due

    @overload
    async def enqueue(
        self, target: JobFunction[P, R] | BoundJob[P, R], *args: P.args, **kwargs: P.kwargs
    ) -> JobHandle | None: ...

    @overload
    async def enqueue(self, target: str, *args: Any, **kwargs: Any) -> JobHandle | None: ...

    async def enqueue(self, target: Target, *args: Any, **kwargs: Any) -> JobHandle | None:
        """Enqueue one job; returns its handle (the jid, a ``str``), or ``None`` if
        middleware dropped it. A unique job already held: a handle with
        ``duplicate`` True naming the holder's jid (nothing was enqueued).

        By name (a string), a job declared in this process takes its options;
        an unknown name goes to ``default`` and the client logs so (WARNING
        unless a live process reading that queue knows the name), and it
        warns when no live process reads the queue or knows the name.
        """
        if isinstance(target, str):
            done = await self.enqueue_by_name(target, args, kwargs)
            self._live.tell(target, done.jid, done)
            if done.jid is None:
                return None
            return JobHandle(done.jid, self, duplicate=done.duplicate)
        job = await self._enqueue(target, args, kwargs)
        if job is None:
            return None
        holder = job.get(_HOLDER)
        if holder is not None:
            return JobHandle(holder, self, duplicate=True)
        return JobHandle(str(job["jid"]), self)

    async def result(self, jid: str, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - the API peers use
        """The value job ``jid`` returned, waiting up to ``timeout`` s for it (None: no limit).

        The job must keep its result (``keep_result``). Waiting is a blocking
        read, so it may start before the job is even fetched. Raises
        ``JobFailed`` (with ``error_class``, ``error_message``) if the job
        failed terminally (dead or discarded), ``ResultTimeout`` if none came
        in time, ``ResultExpired`` if it finished but its result is gone
        (``keep_result`` ran out; told apart for a day after).
        Each waiter holds a pooled connection while it waits.
        """
        chunk = max(self.settings.socket_timeout / 2, 0.05)
        return await wait_result(self.redis, self.keys, jid, timeout, chunk=chunk)

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

    def _write_status(self, job: dict[str, Any], due: float | None) -> None:
        if self._status is None:
            self._status = StatusWriter(self.redis, self.keys, self.settings.status_ttl, _log)
        fields: dict[str, Any] = {
            "state": "queued" if due is None else "scheduled",
            "class": job["class"],
            "queue": job["queue"],
            "enqueued_at": job["enqueued_at"],
            "updated_at": time.time(),
        }
        if due is not None:
            fields["run_at"] = due
        self._status.write(str(job["jid"]), fields, initial=True)

    async def _enqueue(
        self, target: Target, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        job, due = await self._build(target, args, kwargs, time.time())
        if job is None:
            return None
        encoded = payload.encode_job(job)
        if "unique" in job:
            lock = job["unique"]
            one = locks.UniqueJob(
                str(lock["key"]), str(job["jid"]), float(lock["for"]), encoded, due
            )
            [done] = await locks.enqueue_unique(
                self.redis, self.keys, queue=str(job["queue"]), jobs=[one]
            )
            if not done.enqueued:
                # Not enqueued: the caller is told who holds the lock instead.
                return {**job, _HOLDER: done.holder}
        elif due is not None:
            # One call: the ZADD, and the poller's wake-up if it is due first.
            await script("schedule").run(self.redis, self._schedule_keys, [due, encoded])
        else:
            await self._push(job["queue"], encoded)
        if job.get("status"):
            self._write_status(job, due)  # best effort, in the background
        return job

    async def enqueue_by_name(
        self,
        name: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        queue: str | None = None,
        delay: float | None = None,
    ) -> EnqueuedByName:
        """Enqueue job ``name`` and say what was done and what looks wrong; logs nothing.

        ``queue`` and ``delay`` override the options of a job declared here;
        an unknown name goes to ``queue``, else ``default``. The warnings come
        from the live processes' presence: none reads that queue, or none of
        those that do knows the name (it would be buried as ``UnknownJob``).
        """
        target, known = named(name, queue=queue, delay=delay)
        job = await self._enqueue(target, args, kwargs or {})
        if job is None:
            return EnqueuedByName(None, target.options.queue, known, (), served=False)
        used = str(job["queue"])  # middleware may have changed it
        warnings, served = await self._live.ask(name, used)
        holder = job.get(_HOLDER)
        if holder is not None:
            return EnqueuedByName(holder, used, known, tuple(warnings), served, duplicate=True)
        return EnqueuedByName(str(job["jid"]), used, known, tuple(warnings), served)

    async def _push(self, queue: str, encoded: bytes) -> None:
        """Push one job; concurrent pushes are coalesced into one call per queue.

        Jobs enqueued by many tasks in the same event-loop turn (say, under
        ``asyncio.gather``) ride one script call instead of one round trip each.
        Each caller still returns only once its own job is in Redis.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._batch.setdefault(queue, []).append((encoded, future))
        if not self._flush_started:
            self._flush_started = True
            task = loop.create_task(self._flush_batch())
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)
        await future

    async def _flush_batch(self) -> None:
        # A task runs from the next loop turn: every push made in this turn
        # (this one's included) is in the batch it takes.
        self._flush_started = False
        batch, self._batch = self._batch, {}
        await self._flush(batch)

    async def _flush(self, batch: dict[str, list[tuple[bytes, asyncio.Future[None]]]]) -> None:
        enqueue = script("enqueue")
        for queue, items in batch.items():
            keys = [self.keys.queue(queue), self.keys.queues, self.keys.wakeup(queue)]
            for start in range(0, len(items), 1000):
                chunk = items[start : start + 1000]
                try:
                    await enqueue.run(self.redis, keys, [queue, *(job for job, _ in chunk)])
                except Exception as exc:  # noqa: BLE001 - handed to each waiting caller
                    for _, future in chunk:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for _, future in chunk:
                    if not future.done():
                        future.set_result(None)

    @overload
    async def enqueue_many(
        self,
        target: F | _OptionsOf[F],
        items: Iterable[JobArgs[F] | Sequence[Any] | Mapping[str, Any]]
        | AsyncIterable[JobArgs[F] | Sequence[Any] | Mapping[str, Any]],
    ) -> EnqueuedMany: ...

    @overload
    async def enqueue_many(
        self,
        target: str,
        items: Iterable[JobArgs[Any] | Sequence[Any] | Mapping[str, Any]]
        | AsyncIterable[JobArgs[Any] | Sequence[Any] | Mapping[str, Any]],
    ) -> EnqueuedMany: ...

    async def enqueue_many(
        self,
        target: Any,  # Target (the overloads say which); _resolve refuses anything else
        items: Iterable[Any] | AsyncIterable[Any],
    ) -> EnqueuedMany:
        """Enqueue one job per item; returns their jids (middleware's drops left out).

        A unique job whose lock is held is not enqueued: the result (a list of
        the jids enqueued) names it in ``skipped`` as (item position, holder jid).

        An item is ``job.args(...)`` (checked by mypy against the job's
        signature), a tuple of args or a dict of kwargs. ``items`` may be any
        iterable or async iterable, read as it goes: jobs are sent in chunks of
        ``MANY_CHUNK`` (one pipeline each), so memory stays that of one chunk
        (plus the jids) however many there are. An error (a bad argument, Redis)
        raises with the jobs of the chunks before it already enqueued; its note
        says how many.
        """
        by_name = isinstance(target, str)
        known_here = False
        if isinstance(target, str):
            target, known_here = named(target)
        now = time.time()
        name, options = _resolve(target)
        check_queue_name(options.queue)
        batch = ManyBatch(self, target, name=name, options=options, due=_due(options, now), now=now)
        try:
            if isinstance(items, AsyncIterable):
                async for item in items:
                    await batch.add(item)
            else:
                for item in items:
                    await batch.add(item)
            await batch.send()
        except Exception as exc:
            if batch.sent:
                exc.add_note(
                    f"enqueue_many: the first {batch.sent} jobs were enqueued before this error"
                )
            raise
        if by_name and batch.jids:
            # Said once for the batch, of the queue it went to.
            warnings, served = await self._live.ask(batch.name, batch.options.queue)
            done = EnqueuedByName(None, batch.options.queue, known_here, tuple(warnings), served)
            self._live.tell(batch.name, f"{len(batch.jids)} jobs", done)
        return batch.result()
