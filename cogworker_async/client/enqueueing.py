"""The enqueue paths of a ``Client``: one job (``enqueue``, ``enqueue_by_name``) or
many (``enqueue_many``), now or later, checked before anything is written.

A job is pushed with one script call (push, list the queue, wake idle
workers), concurrent pushes coalesced (``pushes.py``); a delayed one is one
``schedule`` call; a unique one takes its lock in the same step
(``store/locks.py``). ``enqueue_many`` streams its items, one pipeline per
chunk of jobs (``enqueue_many.py``). Arguments are checked for JSON at
enqueue, so a bad one is a ``TypeError`` here rather than a failure later.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from cogworker_async import payload
from cogworker_async.client.asking import AskingAboutJobs
from cogworker_async.client.by_name import EnqueuedByName, named
from cogworker_async.client.enqueue_many import EnqueuedMany, ManyBatch
from cogworker_async.client.handle import JobHandle
from cogworker_async.job_options import after_edges
from cogworker_async.jobs import (
    BoundJob,
    JobArgs,
    JobFunction,
    JobOptions,
    check_timing,
    payload_options,
)
from cogworker_async.limits import FAIR, payload_fields
from cogworker_async.middleware import run_client_chain
from cogworker_async.settings import check_queue_name
from cogworker_async.store import after, enqueues, locks
from cogworker_async.store.limits import mark_limits_used
from cogworker_async.timing import check_duration
from cogworker_async.unique.lock import check_lock_key, unique_field

LIMITS_MARK_EVERY = 10.0  # s between a client's "limits are in use" (one SET)

# Set (only) on what ``_enqueue`` returns for a unique duplicate: the holder's jid.
_HOLDER = "__duplicate_of__"

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


def _keeps(job: Mapping[str, Any]) -> bool:
    """Whether a payload built here keeps its result. A job declared here put its
    own ``keep_result`` (or the setting's) in the payload, after middleware: none
    there means the worker's fallbacks (the same ``@job``, the setting) keep none."""
    keep = job.get("keep_result")
    return isinstance(keep, int | float) and not isinstance(keep, bool) and keep > 0


def _due(options: JobOptions, now: float) -> float | None:
    # JobOptions can be built directly (the CLI does): checked here too, once per call.
    check_timing(options.delay, options.at)
    if options.at is not None:
        at = options.at.timestamp() if isinstance(options.at, datetime) else float(options.at)
        if at > now:
            check_duration(at - now, "at (its distance from now)")
            return at
        return None
    if options.delay:
        return now + options.delay
    return None


class Enqueueing(AskingAboutJobs):
    """``enqueue``, ``enqueue_by_name`` and ``enqueue_many`` (their handles ask
    through ``AskingAboutJobs``)."""

    _limits_marked = -LIMITS_MARK_EVERY  # when this client last said limits are in use
    _fair_marked = -LIMITS_MARK_EVERY  # and fair keys

    async def _mark_limits(self, fair: bool = False) -> None:
        """Say limits are in use before this client's first job with limits is
        written (the fetch checks jobs for them only then), and again every
        ``LIMITS_MARK_EVERY`` s: a Redis that lost its data (no persistence)
        lets this client's limited jobs run unchecked that long at most."""
        now = time.monotonic()
        if fair and now - self._fair_marked >= LIMITS_MARK_EVERY:
            await mark_limits_used(self.redis, self.keys, fair=True)
            self._limits_marked = self._fair_marked = now
        elif now - self._limits_marked >= LIMITS_MARK_EVERY:
            await mark_limits_used(self.redis, self.keys)
            self._limits_marked = now

    async def _build(
        self, target: Target, args: Sequence[Any], kwargs: Mapping[str, Any], now: float
    ) -> tuple[dict[str, Any] | None, float | None]:
        name, options = _resolve(target)
        if not isinstance(target, str):  # a function known here: the arguments must fit it
            (target.function if isinstance(target, BoundJob) else target).check_call(args, kwargs)
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
        if options.limits:
            job.update(payload_fields(options.limits, args, kwargs))
            await self._mark_limits(FAIR in job)
        edges = after_edges(options.after, options.if_failed)
        if edges is not None:
            if str(job["jid"]) in edges:
                raise ValueError("after: a job can't wait on itself")
            job["after"] = edges
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
            return JobHandle(
                done.jid,
                self,
                duplicate=done.duplicate,
                keeps_result=done.keeps_result,
                queue=done.queue,
            )
        job = await self._enqueue(target, args, kwargs)
        if job is None:
            return None
        holder = job.get(_HOLDER)
        queue = str(job["queue"])
        if holder is not None:
            return JobHandle(holder, self, duplicate=True, queue=queue)
        return JobHandle(str(job["jid"]), self, keeps_result=_keeps(job), queue=queue)

    def _write_status(self, job: dict[str, Any], due: float | None) -> None:
        fields: dict[str, Any] = {
            "state": "queued" if due is None else "scheduled",
            "class": job["class"],
            "queue": job["queue"],
            "enqueued_at": job["enqueued_at"],
            "updated_at": time.time(),
        }
        if due is not None:
            fields["run_at"] = due
        self._status_writer().write(str(job["jid"]), fields, initial=True)

    async def _enqueue(
        self, target: Target, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        job, due = await self._build(target, args, kwargs, time.time())
        if job is None:
            return None
        encoded = payload.encode_job(job)
        if "unique" in job:
            lock = job["unique"]
            check_lock_key(self.keys, lock)
            one = locks.UniqueJob(
                str(lock["key"]), str(job["jid"]), float(lock["for"]), encoded, due
            )
            [done] = await locks.enqueue_unique(
                self.redis, self.keys, queue=str(job["queue"]), jobs=[one]
            )
            if not done.enqueued:
                # Not enqueued: the caller is told who holds the lock instead.
                return {**job, _HOLDER: done.holder}
        elif "after" in job:
            # Judged, then pushed, waiting or ended, in one step; it writes the
            # status too (a waiting job's says on what).
            ttl = self._status_writer().ttl if job.get("status") else None
            await after.enqueue_after(self.redis, self.keys, job, status_ttl=ttl)
            return job
        elif due is not None:
            # One call: the ZADD, and the poller's wake-up if it is due first.
            await enqueues.schedule(self.redis, self.keys, [due, encoded])
        else:
            await self._pushes.push(job["queue"], encoded)
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
        # A name unknown here: the worker's own @job may keep it (not known here).
        keeps = True if _keeps(job) else (False if known else None)
        return EnqueuedByName(
            str(job["jid"]), used, known, tuple(warnings), served, keeps_result=keeps
        )

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
        if options.after is not None:
            raise ValueError("after=[...] is for enqueue, one job at a time (not enqueue_many)")
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
