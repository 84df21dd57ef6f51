"""``Client.enqueue_many``'s streaming batch: jobs built and sent one chunk at a time.

Memory is one chunk's (plus the jids), whatever the count: each chunk of
``MANY_CHUNK`` jobs goes out as one pipeline, its script calls each taking at
most ``SCRIPT_ARGS`` payloads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cogworker_async import payload
from cogworker_async.jobs import BoundJob, JobArgs, JobFunction, JobOptions, payload_options
from cogworker_async.store.connection import is_cluster
from cogworker_async.store.scripts import EncodableArg, script

if TYPE_CHECKING:
    from cogworker_async.client import Client

# enqueue_many sends this many jobs per pipeline: its memory is one chunk's,
# whatever the count, and a pipeline this size still runs at full speed.
MANY_CHUNK = 10_000
SCRIPT_ARGS = 1000  # payloads per script call (a bounded argument list)


class ManyBatch:
    """``enqueue_many``'s jobs being built: one chunk at a time, sent when full."""

    __slots__ = (
        "by_queue",
        "client",
        "due",
        "extra",
        "fresh_jids",
        "jids",
        "name",
        "now",
        "options",
        "pending",
        "scheduled",
        "sent",
        "target",
    )

    def __init__(
        self,
        client: Client,
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
        self.extra = payload_options(self.options, client.settings)
        self.due = due
        self.fresh_jids = payload.jid_source()
        self.jids: list[str] = []
        self.by_queue: dict[str, list[bytes]] = defaultdict(list)
        self.scheduled: list[EncodableArg] = []  # score, payload, score, payload, ...
        self.pending = 0  # jobs built, not yet sent
        self.sent = 0

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
        if self.client.middleware:
            job, due = await self.client._build(self.target, args, kwargs, self.now)
            if job is None:
                return
        else:
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
        one = payload.encode_job(job)
        if due is not None:
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
        self.by_queue, self.scheduled, self.pending = defaultdict(list), [], 0
        await self._send_chunk(by_queue, scheduled)
        self.sent += count

    async def _send_chunk(
        self, by_queue: dict[str, list[bytes]], scheduled: list[EncodableArg]
    ) -> None:
        """One pipeline for one chunk."""
        client = self.client
        keys = client.keys
        enqueue = script("enqueue")
        schedule = script("schedule")
        # A cluster pipeline refuses SCRIPT LOAD: it goes ahead, to every primary.
        cluster = is_cluster(client.redis)
        if cluster:
            for needed in (enqueue, schedule) if scheduled else (enqueue,):
                await client.redis.script_load(needed.text)
        async with client.redis.pipeline(transaction=False) as pipe:
            # SCRIPT LOAD first makes the EVALSHAs behind it safe even right
            # after a SCRIPT FLUSH or a restart: no NOSCRIPT to recover from.
            if not cluster:
                pipe.script_load(enqueue.text)
            for queue, encoded in by_queue.items():
                queue_keys = [keys.queue(queue), keys.queues, keys.wakeup(queue)]
                # Chunks keep each script call's argument list reasonable.
                for start in range(0, len(encoded), SCRIPT_ARGS):
                    chunk = encoded[start : start + SCRIPT_ARGS]
                    pipe.evalsha(enqueue.sha, len(queue_keys), *queue_keys, queue, *chunk)
            if scheduled:
                schedule_keys = [keys.schedule, keys.schedule_wakeup]
                if not cluster:
                    pipe.script_load(schedule.text)
                for start in range(0, len(scheduled), 2 * SCRIPT_ARGS):
                    pairs = scheduled[start : start + 2 * SCRIPT_ARGS]
                    pipe.evalsha(schedule.sha, 2, *schedule_keys, *pairs)
            await pipe.execute()
