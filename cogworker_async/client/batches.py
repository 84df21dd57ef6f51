"""``Client.batch``: jobs enqueued as one batch, with callbacks that fire exactly once.

A batch is open while its ``async with`` block runs, so no callback fires
while members are still being added; the block's end closes it. Each member
carries the batch in its payload (``"batch": bid``), a hold of kind
``holds.BATCH``: the step that ends the member (success, death, discard,
abort, an operator's delete or kill) counts it and, for the last one, pushes
the callbacks in that same step (``includes/batch_end.lua``). A child batch
(``b.batch(...)``) is one member of its parent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from cogworker_async import payload
from cogworker_async.client.aborting import AbortOutcome
from cogworker_async.client.handle import JobHandle
from cogworker_async.jobs import BoundJob, JobArgs, JobFunction
from cogworker_async.store import batches as store
from cogworker_async.store.batches import BATCH_KEEP, BatchGone, Callback

if TYPE_CHECKING:
    from cogworker_async.client.enqueueing import Enqueueing

# What a callback (or a flow's step) may be: ``job.args(...)``, a job (no
# arguments), its ``.options(...)``, or a registered name.
CallbackTarget = JobArgs[Any] | JobFunction[Any, Any] | BoundJob[Any, Any] | str
MEMBERS_CHUNK = 500  # members per batch_add call (enqueue_many)

__all__ = ["Batch", "BatchGone", "target_of"]


def target_of(spec: CallbackTarget) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The job, args and kwargs a callback spec names."""
    if isinstance(spec, JobArgs):
        if spec.job is None:
            raise TypeError("a callback's arguments must come from job.args(...), naming the job")
        return spec.job, spec.args, spec.kwargs
    if isinstance(spec, JobFunction | BoundJob | str):
        return spec, (), {}
    raise TypeError(
        f"expected job.args(...), a @job function, its .options(...) or a name, got {spec!r}"
    )


class Batch:
    """One batch: ``enqueue`` / ``enqueue_many`` add members; ``batch(...)`` a child."""

    def __init__(
        self,
        client: Enqueueing,
        bid: str,
        *,
        callbacks: Mapping[str, CallbackTarget | None] | None = None,
        description: str = "",
        parent: str | None = None,
        keep: float = BATCH_KEEP,
        owned: bool = True,
    ) -> None:
        self.client = client
        self.bid = bid
        self.parent = parent
        self._callbacks = {k: v for k, v in (callbacks or {}).items() if v is not None}
        self._description = description
        self._keep = keep
        self._owned = owned  # opened and closed by this object's block
        self.size = 0  # members this object added

    async def _callback(self, event: str, spec: CallbackTarget, now: float) -> Callback:
        target, args, kwargs = target_of(spec)
        job, _ = await self.client._build(target, args, kwargs, now)
        if job is None:
            raise ValueError(f"batch {event} callback: client middleware dropped it")
        if "after" in job:
            raise ValueError(f"batch {event} callback: after=[...] is not for a callback")
        job["batch_callback"] = {"bid": self.bid, "event": event}
        return Callback(str(job["queue"]), payload.encode_job(job))

    async def __aenter__(self) -> Batch:
        if not self._owned:
            return self
        now = time.time()
        callbacks = {
            event: await self._callback(event, spec, now) for event, spec in self._callbacks.items()
        }
        opened = await store.open_batch(
            self.client.redis,
            self.client.keys,
            bid=self.bid,
            created_at=now,
            description=self._description,
            callbacks=callbacks,
            parent=self.parent,
            keep=self._keep,
        )
        if opened is store.Opened.PARENT_OVER:
            raise BatchGone(f"batch {self.parent} is gone or over: no child can be added to it")
        if opened is store.Opened.EXISTS:
            raise ValueError(f"batch {self.bid} exists already")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Closed even when the block raised: the members already added run and
        # end, and a batch left open would never fire its callbacks.
        if self._owned:
            await store.close_batch(self.client.redis, self.client.keys, self.bid)

    def batch(
        self,
        *,
        on_success: CallbackTarget | None = None,
        on_complete: CallbackTarget | None = None,
        on_death: CallbackTarget | None = None,
        description: str = "",
    ) -> Batch:
        """A child batch: one member of this one, ended when all of its own members are."""
        return Batch(
            self.client,
            payload.new_jid(),
            callbacks={"success": on_success, "complete": on_complete, "death": on_death},
            description=description,
            parent=self.bid,
            keep=self._keep,
        )

    async def _member(
        self, target: Any, args: Sequence[Any], kwargs: Mapping[str, Any], now: float
    ) -> tuple[dict[str, Any], float | None] | None:
        job, due = await self.client._build(target, args, kwargs, now)
        if job is None:
            return None
        if "unique" in job:
            raise ValueError("a unique job can't be a batch member (not supported yet)")
        if "after" in job:
            raise ValueError("a job with after=[...] can't be a batch member (not supported yet)")
        job["batch"] = self.bid
        return job, due

    async def enqueue(self, target: Any, *args: Any, **kwargs: Any) -> JobHandle | None:
        """Enqueue one member (as ``Client.enqueue``); None when middleware dropped it.
        ``BatchGone`` when the batch is over (a member can't join a finished batch)."""
        built = await self._member(target, args, kwargs, time.time())
        if built is None:
            return None
        job, due = built
        jid = str(job["jid"])
        await store.add_members(
            self.client.redis,
            self.client.keys,
            bid=self.bid,
            queue=str(job["queue"]),
            members=[(jid, payload.encode_job(job))],
            due=due,
            keep_results="keep_result" in job,
        )
        self.size += 1
        if job.get("status"):
            self.client._write_status(job, due)
        return JobHandle(jid, self.client, queue=str(job["queue"]))

    async def enqueue_many(
        self, target: Any, items: Iterable[Sequence[Any] | Mapping[str, Any] | JobArgs[Any]]
    ) -> list[str]:
        """Enqueue one member per item (a tuple of args, a dict of kwargs or
        ``job.args(...)``), ``MEMBERS_CHUNK`` a call; returns their jids."""
        jids: list[str] = []
        await self._add_many(target, items, jids.append)
        return jids

    async def enqueue_stream(
        self, target: Any, items: Iterable[Sequence[Any] | Mapping[str, Any] | JobArgs[Any]]
    ) -> int:
        """As ``enqueue_many``, for a batch of any size: items are read as they come
        (a generator), sent ``MEMBERS_CHUNK`` a call and nothing is kept; returns
        how many members were added."""
        return await self._add_many(target, items, None)

    async def _add_many(
        self,
        target: Any,
        items: Iterable[Sequence[Any] | Mapping[str, Any] | JobArgs[Any]],
        note: Callable[[str], None] | None,
    ) -> int:
        # Only one chunk is held at a time: a million members are streamed in
        # 500-member calls (the client's memory stays that of one chunk, plus
        # the jids when the caller keeps them through ``note``).
        chunk: list[tuple[str, bytes]] = []
        # A chunk goes to one queue (or due time), and its members all keep a
        # result or all keep none (only those that keep one are listed, for
        # batch_results).
        where: tuple[str, float | None, bool] | None = None
        now = time.time()
        added = 0

        async def send() -> None:
            if chunk and where is not None:
                await store.add_members(
                    self.client.redis,
                    self.client.keys,
                    bid=self.bid,
                    queue=where[0],
                    members=chunk,
                    due=where[1],
                    keep_results=where[2],
                )
                self.size += len(chunk)
                chunk.clear()

        for item in items:
            if isinstance(item, JobArgs):
                args, kwargs = item.args, item.kwargs
            elif isinstance(item, Mapping):
                args, kwargs = (), dict(item)
            else:
                args, kwargs = tuple(item), {}
            built = await self._member(target, args, kwargs, now)
            if built is None:
                continue
            job, due = built
            here = (str(job["queue"]), due, "keep_result" in job)
            if where is not None and here != where:
                await send()
            where = here
            jid = str(job["jid"])
            chunk.append((jid, payload.encode_job(job)))
            added += 1
            if note is not None:
                note(jid)
            if len(chunk) >= MEMBERS_CHUNK:
                await send()
        await send()
        return added


async def abort_tree(client: Enqueueing, bid: str) -> int:
    """Abort every member of ``bid`` not ended yet, its child batches' too; returns
    how many were stopped (removed, or cancelling)."""
    stopped = 0
    # Noted first: a flow's next stage, started by this batch's end, does not run.
    await store.mark_aborted(client.redis, client.keys, bid)
    for member in await store.pending_members(client.redis, client.keys, bid):
        if member.startswith("b:"):
            stopped += await abort_tree(client, member[2:])
            continue
        outcome: AbortOutcome = await client.abort(member)
        if outcome.aborted:
            stopped += 1
    return stopped
