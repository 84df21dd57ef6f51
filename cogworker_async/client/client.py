"""``Client``: enqueue jobs now or later, from anywhere, and ask about them.

Assembled from what it does, one module each: its connection and what it
holds for its life (``lifecycle.py``), the questions about one job
(``asking.py``: result, status, abort) and the enqueue paths
(``enqueueing.py``, with ``pushes.py`` and ``enqueue_many.py``).

Enqueued by name (``by_name.py``), a job declared in this process takes its
own options; an unknown name goes to the given queue, else ``default``, and
the client says so, and what the live processes suggest is wrong.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from cogworker_async import payload
from cogworker_async.client.aborting import AbortOutcome
from cogworker_async.client.batches import Batch, CallbackTarget, abort_tree
from cogworker_async.client.by_name import EnqueuedByName
from cogworker_async.client.enqueue_many import EnqueuedMany
from cogworker_async.client.enqueueing import Enqueueing, _due
from cogworker_async.client.flows import EnqueuedFlow, enqueue_flow
from cogworker_async.client.handle import JobHandle
from cogworker_async.store import batches as batch_store
from cogworker_async.store.batch_results import read_results
from cogworker_async.store.batches import BATCH_KEEP

# EnqueuedByName (what enqueue_by_name returns) is part of this module's API;
# _due stays importable here (the duration tests read it).
__all__ = [
    "AbortOutcome",
    "Batch",
    "Client",
    "EnqueuedByName",
    "EnqueuedFlow",
    "EnqueuedMany",
    "JobHandle",
    "_due",
]


class Client(Enqueueing):
    """Enqueues jobs. Use as ``async with Client(settings) as client:`` or call ``close()``.

    ``Client(settings=None, *, redis=None, middleware=())``: without ``redis`` it
    makes (and closes) its own connection pool from the settings; ``middleware``
    sees each job's payload before it is written (and may drop it).
    """

    def batch(
        self,
        *,
        on_success: CallbackTarget | None = None,
        on_complete: CallbackTarget | None = None,
        on_death: CallbackTarget | None = None,
        description: str = "",
        keep: float = BATCH_KEEP,
    ) -> Batch:
        """A new batch: ``async with client.batch(on_success=notify.args("done")) as b:
        await b.enqueue(resize, "a.png")``. Open until the block ends; then, once every
        member has ended, ``on_success`` (all succeeded) and ``on_complete`` (always)
        are enqueued, exactly once; ``on_death`` at the first member that dies. A
        finished batch is kept ``keep`` s for ``batch_status``."""
        return Batch(
            self,
            payload.new_jid(),
            callbacks={"success": on_success, "complete": on_complete, "death": on_death},
            description=description,
            keep=keep,
        )

    def batch_of(self, bid: str) -> Batch:
        """Batch ``bid``, to add members to while it runs (from a running member:
        ``client.batch_of(current_job().batch)``); not opened nor closed here."""
        return Batch(self, bid, owned=False)

    async def batch_status(self, bid: str) -> dict[str, Any] | None:
        """``{"state": "open|running|success|complete|dead", "total", "pending",
        "succeeded", "failed", "dead", "callbacks", ...}``, or None (no such batch)."""
        return await batch_store.batch_status(self.redis, self.keys, bid)

    async def batch_results(self, bid: str) -> AsyncIterator[Any]:
        """The results of batch ``bid``'s members that keep one (``keep_result``), in
        the order they were added: ``async for value in client.batch_results(bid)``.
        Read ``RESULTS_CHUNK`` (1,000) a round trip, never all at once. A member that
        failed, or whose result expired, gives None; nothing when the batch is gone
        or no member keeps a result. Inside a worker's job: ``batch_results()``."""
        async for pairs in read_results(self.redis, self.keys, bid):
            for _, value in pairs:
                yield value

    async def abort_batch(self, bid: str) -> int:
        """Abort every member of batch ``bid`` not ended yet (its child batches'
        too); each counts as failed, so the batch ends and ``on_complete`` runs.
        Returns how many members were stopped."""
        return await abort_tree(self, bid)

    async def enqueue_flow(self, flow: Any) -> EnqueuedFlow:
        """Enqueue a workflow: ``chain(a.args(1), b.args(), c.args())`` (each gets the
        previous result as its first argument), ``group(...)``, ``chord(group(...),
        merge.args())`` (merge gets the group's results, in order), or one job. Every
        job is built first (a mistake writes nothing); returns the handles, stage
        by stage (``.last``: the final result's)."""
        return await enqueue_flow(self, flow)

    async def abort_flow(self, flow: EnqueuedFlow) -> int:
        """Abort a flow: the jobs of its stage that runs now (as ``abort_batch``), and
        every later stage ends as failed with ``JobAborted``, never run, whatever its
        ``if_failed``. Returns how many running or waiting jobs were stopped."""
        stopped = 0
        for bid in flow.bids:
            stopped += await abort_tree(self, bid)
        return stopped
