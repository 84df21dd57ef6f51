"""``Client``: enqueue jobs now or later, from anywhere.

A job is pushed with one script call (push, list the queue, wake idle
workers); ``enqueue_many`` sends one pipeline. Arguments are checked for JSON
at enqueue, so a bad one is a ``TypeError`` here rather than a failure later.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, ParamSpec, TypeVar, overload

from redis.asyncio import Redis

from cogworker_async import payload
from cogworker_async.jobs import BoundJob, JobFunction, JobOptions
from cogworker_async.keys import Keys
from cogworker_async.middleware import ClientMiddleware, run_client_chain
from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect
from cogworker_async.store.scripts import script

P = ParamSpec("P")
R = TypeVar("R")

Target = JobFunction[Any, Any] | BoundJob[Any, Any] | str


def _resolve(target: Target) -> tuple[str, JobOptions]:
    if isinstance(target, BoundJob):
        return target.name, target.options
    if isinstance(target, JobFunction):
        return target.name, target.defaults
    if isinstance(target, str):
        if not target:
            raise ValueError("job name must not be empty")
        return target, JobOptions()
    raise TypeError(f"expected a @job function, its .options(...) or a job name, got {target!r}")


def _due(options: JobOptions, now: float) -> float | None:
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
        self._schedule_keys = [self.keys.schedule, self.keys.schedule_wakeup]

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
        if self._own_redis:
            await self.redis.aclose()

    async def _build(
        self, target: Target, args: Sequence[Any], kwargs: Mapping[str, Any], now: float
    ) -> tuple[dict[str, Any] | None, float | None]:
        name, options = _resolve(target)
        extra: dict[str, Any] = {"retry": options.retry, "timeout": options.timeout}
        job = payload.build(name, args, kwargs, options.queue, now=now, extra=extra)
        if self.middleware:
            # Middleware sees only JSON-safe arguments (checked one by one, so
            # the error names the one at fault).
            payload.ensure_json(args, kwargs)
            job = await run_client_chain(self.middleware, job)  # type: ignore[assignment]
        return job, _due(options, now)

    @overload
    async def enqueue(
        self, target: JobFunction[P, R] | BoundJob[P, R], *args: P.args, **kwargs: P.kwargs
    ) -> str | None: ...

    @overload
    async def enqueue(self, target: str, *args: Any, **kwargs: Any) -> str | None: ...

    async def enqueue(self, target: Target, *args: Any, **kwargs: Any) -> str | None:
        """Enqueue one job; returns its jid, or ``None`` if middleware dropped it."""
        job, due = await self._build(target, args, kwargs, time.time())
        if job is None:
            return None
        encoded = payload.encode_job(job, args, kwargs)
        if due is not None:
            # One call: the ZADD, and the poller's wake-up if it is due first.
            await script("schedule").run(self.redis, self._schedule_keys, [due, encoded])
        else:
            await self._push(job["queue"], encoded)
        return str(job["jid"])

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

    async def enqueue_many(
        self, target: Target, arg_list: Iterable[Sequence[Any] | Mapping[str, Any]]
    ) -> list[str]:
        """Enqueue one job per item (a tuple of args or a dict of kwargs) in one pipeline."""
        now = time.time()
        by_queue: dict[str, list[bytes]] = defaultdict(list)
        scheduled: dict[bytes, float] = {}
        jids: list[str] = []
        # Without middleware every job has the same name, options and due
        # time: resolved once, and each job costs a dict and one encode.
        name, options = _resolve(target)
        extra = {"retry": options.retry, "timeout": options.timeout}
        common_due = _due(options, now)
        fresh_jids = payload.jid_source()
        for item in arg_list:
            # A tuple first: isinstance against the Mapping ABC is slow.
            if not isinstance(item, tuple) and isinstance(item, Mapping):
                args: Sequence[Any] = ()
                kwargs: Mapping[str, Any] = item
            else:
                args, kwargs = item, {}
            if self.middleware:
                job, due = await self._build(target, args, kwargs, now)
                if job is None:
                    continue
            else:
                job = payload.build(
                    name, args, kwargs, options.queue, now=now, jid=next(fresh_jids), extra=extra
                )
                due = common_due
            one = payload.encode_job(job, args, kwargs)
            if due is not None:
                scheduled[one] = due
            else:
                by_queue[job["queue"]].append(one)
            jids.append(str(job["jid"]))
        if not jids:
            return jids
        enqueue = script("enqueue")
        async with self.redis.pipeline(transaction=False) as pipe:
            # SCRIPT LOAD first makes the EVALSHAs behind it safe even right
            # after a SCRIPT FLUSH or a restart: no NOSCRIPT to recover from.
            pipe.script_load(enqueue.text)
            for queue, encoded in by_queue.items():
                keys = [self.keys.queue(queue), self.keys.queues, self.keys.wakeup(queue)]
                # Chunks keep each script call's argument list reasonable.
                for start in range(0, len(encoded), 1000):
                    chunk = encoded[start : start + 1000]
                    pipe.evalsha(enqueue.sha, len(keys), *keys, queue, *chunk)
            if scheduled:
                pipe.zadd(self.keys.schedule, scheduled)
            await pipe.execute()
        return jids
