"""``Client.enqueue_many``'s streaming batch: jobs built and sent one chunk at a time.

Memory is one chunk's (plus the jids), whatever the count: each chunk of
``MANY_CHUNK`` jobs goes out as one pipeline, its script calls each taking at
most ``SCRIPT_ARGS`` payloads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from redis.asyncio import Redis

from cogworker_async import payload
from cogworker_async.jobs import BoundJob, JobArgs, JobFunction, JobOptions, payload_options
from cogworker_async.keys import Keys
from cogworker_async.limits import FAIR, payload_fields
from cogworker_async.middleware import ClientMiddleware
from cogworker_async.settings import Settings
from cogworker_async.store import enqueues, locks
from cogworker_async.store.scripts import EncodableArg
from cogworker_async.unique.lock import check_lock_key, unique_field

# enqueue_many sends this many jobs per pipeline: its memory is one chunk's,
# whatever the count, and a pipeline this size still runs at full speed.
MANY_CHUNK = 10_000
SCRIPT_ARGS = 1000  # payloads per script call (a bounded argument list)


class BuildsJobs(Protocol):
    """What a batch needs of its client (``Client``): its connection, and its one
    way of building a job's payload (checks, options, middleware)."""

    settings: Settings
    keys: Keys
    redis: Redis
    middleware: list[ClientMiddleware]

    async def _build(
        self, target: Any, args: Sequence[Any], kwargs: Mapping[str, Any], now: float
    ) -> tuple[dict[str, Any] | None, float | None]: ...

    async def _mark_limits(self, fair: bool = False) -> None: ...


class EnqueuedMany(list[str]):
    """What ``enqueue_many`` returns: the jids enqueued (a ``list``, as before), and
    ``skipped``: for each unique job not enqueued because its lock was held, its
    item's position in ``items`` (0-based) and the holder's jid."""

    skipped: list[tuple[int, str]]

    def __init__(self, jids: list[str], skipped: list[tuple[int, str]]) -> None:
        super().__init__(jids)
        self.skipped = skipped


class ManyBatch:
    """``enqueue_many``'s jobs being built: one chunk at a time, sent when full."""

    __slots__ = (
        "_skipped_jids",
        "added",
        "by_queue",
        "client",
        "due",
        "extra",
        "fresh_jids",
        "function",
        "jids",
        "name",
        "now",
        "options",
        "pending",
        "scheduled",
        "sent",
        "skipped",
        "target",
        "unique",
    )

    def __init__(
        self,
        client: BuildsJobs,
        target: JobFunction[Any, Any] | BoundJob[Any, Any] | str,
        *,
        name: str,
        options: JobOptions,
        due: float | None,
        now: float,
    ) -> None:
        """``name``, ``options`` and ``due``: the target's, resolved (and checked) once."""
        self.client = client
        self.target = target
        self.now = now
        # Without middleware every job has the same name, options and due
        # time: resolved once, and each job costs a dict and one encode.
        self.name, self.options = name, options
        # Each item's arguments are bound to its handler's signature (cached).
        self.function: JobFunction[Any, Any] | None = (
            None
            if isinstance(target, str)
            else (target.function if isinstance(target, BoundJob) else target)
        )
        self.extra = payload_options(self.options, client.settings)
        self.due = due
        self.fresh_jids = payload.jid_source()
        self.jids: list[str] = []
        self.by_queue: dict[str, list[bytes]] = defaultdict(list)
        self.scheduled: list[EncodableArg] = []  # score, payload, score, payload, ...
        self.pending = 0  # jobs built, not yet sent
        self.sent = 0
        self.added = 0  # items seen (a unique duplicate is named by its position)
        # Unique jobs by queue, with their items' positions: one script call per
        # queue and SCRIPT_ARGS jobs, after the plain ones.
        self.unique: dict[str, list[tuple[int, locks.UniqueJob]]] = defaultdict(list)
        self.skipped: list[tuple[int, str]] = []
        self._skipped_jids: set[str] = set()

    async def add(self, item: Any) -> None:
        # A tuple first: isinstance against the Mapping ABC is slow.
        if isinstance(item, tuple):
            args: Sequence[Any] = item
            kwargs: Mapping[str, Any] = {}
        elif isinstance(item, JobArgs):
            args, kwargs = item.args, item.kwargs
        elif isinstance(item, Mapping):
            args, kwargs = (), item
        else:
            args, kwargs = item, {}
        if self.client.middleware:  # _build checks the arguments against the handler
            job, due = await self.client._build(self.target, args, kwargs, self.now)
            if job is None:
                return
        else:
            if self.function is not None:
                self.function.check_call(args, kwargs)
            job = payload.build(
                self.name,
                args,
                kwargs,
                self.options.queue,
                now=self.now,
                jid=next(self.fresh_jids),
                extra=self.extra,
            )
            due = self.due
            if self.options.unique is not None:
                job["unique"] = unique_field(
                    self.client.keys,
                    name=self.name,
                    args=args,
                    kwargs=kwargs,
                    queue=job["queue"],
                    mode=self.options.unique,
                    unique_for=self.options.unique_for,
                    unique_key=self.options.unique_key,
                )
            if self.options.limits:
                job.update(payload_fields(self.options.limits, args, kwargs))
                await self.client._mark_limits(FAIR in job)
        position = self.added
        self.added += 1
        one = payload.encode_job(job)
        lock = job.get("unique")
        if lock is not None:
            if self.client.middleware:
                check_lock_key(self.client.keys, lock)  # a middleware may have changed it
            unique = locks.UniqueJob(lock["key"], str(job["jid"]), float(lock["for"]), one, due)
            self.unique[job["queue"]].append((position, unique))
        elif due is not None:
            self.scheduled.append(due)
            self.scheduled.append(one)
        else:
            self.by_queue[job["queue"]].append(one)
        self.jids.append(str(job["jid"]))
        self.pending += 1
        if self.pending >= MANY_CHUNK:
            await self.send()

    async def send(self) -> None:
        if not self.pending:
            return
        by_queue, scheduled, count = self.by_queue, self.scheduled, self.pending
        unique, self.unique = self.unique, defaultdict(list)
        self.by_queue, self.scheduled, self.pending = defaultdict(list), [], 0
        await self._send_chunk(by_queue, scheduled, unique)
        self.sent += count

    def result(self) -> EnqueuedMany:
        self.skipped.sort()
        if not self.skipped:
            return EnqueuedMany(self.jids, [])
        kept = [jid for jid in self.jids if jid not in self._skipped_jids]
        return EnqueuedMany(kept, list(self.skipped))

    async def _send_chunk(
        self,
        by_queue: dict[str, list[bytes]],
        scheduled: list[EncodableArg],
        unique: dict[str, list[tuple[int, locks.UniqueJob]]],
    ) -> None:
        """One pipeline for one chunk (unique jobs in order, so of two items under
        one key the second is skipped)."""
        calls = [
            (queue, items[start : start + SCRIPT_ARGS])
            for queue, items in unique.items()
            for start in range(0, len(items), SCRIPT_ARGS)
        ]
        replies = await enqueues.send_many(
            self.client.redis,
            self.client.keys,
            by_queue,
            scheduled,
            [(queue, [one for _, one in call]) for queue, call in calls],
            per_call=SCRIPT_ARGS,
        )
        for (_, call), reply in zip(calls, replies, strict=True):
            jobs = [one for _, one in call]
            for (position, one), done in zip(
                call, locks.unique_enqueue_replies(jobs, reply), strict=True
            ):
                if not done.enqueued:
                    self.skipped.append((position, done.holder))
                    self._skipped_jids.add(one.jid)
