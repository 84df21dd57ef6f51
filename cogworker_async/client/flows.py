"""``Client.enqueue_flow``: a chain, group or chord, built here in full and started.

Every job of the flow is built now (its options, middleware, a jid of its
own), so a mistake is an error here and nothing is written; the first stage
is started at once, each next one by the batch of the one before it
(``workflows/runner.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cogworker_async import payload
from cogworker_async.client.batches import target_of
from cogworker_async.client.handle import JobHandle
from cogworker_async.workflows.canvas import Group, Step, stages_of
from cogworker_async.workflows.runner import FLOW_KEEP, start_stage

if TYPE_CHECKING:
    from cogworker_async.client.enqueueing import Enqueueing


@dataclass(frozen=True, slots=True)
class EnqueuedFlow:
    """The flow's jobs, stage by stage (handles: ``await flow.last.result()``), and
    the batch of each stage (``client.batch_status``)."""

    stages: tuple[tuple[JobHandle, ...], ...]
    bids: tuple[str, ...]

    @property
    def last(self) -> JobHandle:
        """The last stage's (first) job: a chain's or a chord's final result."""
        return self.stages[-1][0]


async def _built(client: Enqueueing, one: Step, now: float, *, fed: bool) -> dict[str, Any]:
    """The step's payload; ``fed``: the previous stage's result will come first in its
    arguments (checked against the handler with a stand-in, then left out)."""
    target, args, kwargs = target_of(one.spec)
    job, due = await client._build(target, (None, *args) if fed else args, kwargs, now)
    if job is not None and fed:
        job["args"] = job["args"][1:]
    if job is None:
        raise ValueError("a flow's step was dropped by client middleware: the flow can't run")
    if due is not None:
        raise ValueError("a flow's step can't be delayed (delay/at): not supported yet")
    if "unique" in job:
        raise ValueError("a unique job can't be a flow's step (not supported yet)")
    keep = job.get("keep_result")
    if not isinstance(keep, int | float) or isinstance(keep, bool) or keep < FLOW_KEEP:
        job["keep_result"] = FLOW_KEEP  # the next stage reads it
    return job


async def enqueue_flow(client: Enqueueing, flow: Any) -> EnqueuedFlow:
    """Build every job of ``flow`` and start its first stage."""
    now = time.time()
    stages: list[dict[str, Any]] = []
    handles: list[tuple[JobHandle, ...]] = []
    for index, stage in enumerate(stages_of(flow)):
        steps = stage.steps if isinstance(stage, Group) else (stage,)
        jobs = [await _built(client, one, now, fed=index > 0) for one in steps]
        stages.append(
            {
                "bid": payload.new_jid(),
                "group": isinstance(stage, Group),
                "if_failed": stage.if_failed,
                "jobs": [
                    {
                        "jid": job["jid"],
                        "queue": job["queue"],
                        "payload": payload.encode_job(job).decode(),
                    }
                    for job in jobs
                ],
            }
        )
        handles.append(
            tuple(
                JobHandle(str(job["jid"]), client, keeps_result=True, queue=str(job["queue"]))
                for job in jobs
            )
        )
    spec = {"stages": stages}
    await start_stage(client.redis, client.keys, spec, 0)
    return EnqueuedFlow(tuple(handles), tuple(stage["bid"] for stage in stages))
