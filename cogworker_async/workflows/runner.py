"""Running a flow: each stage is a batch, started by the one before it.

A flow travels as a JSON object: ``{"stages": [{"bid", "group", "if_failed",
"jobs": [{"jid", "queue", "payload"}]}]}``, each job's payload built in full by
the client at ``enqueue_flow`` (its options, middleware, a jid of its own,
``keep_result`` at least ``FLOW_KEEP``). ``start_stage`` opens the stage's
batch (its ``on_complete``: ``cogworker.flow_step`` for the next stage), adds
its jobs with the previous result as first argument, and closes it. The step
job runs at least once, so starting a stage is idempotent: a stage whose
batch is already running or done is not started again (an earlier run did),
and one left open by a run that died half-way is completed: its jobs are
added once per chunk (``batch_add``'s once-token), never twice, so a job
that already ended is not made pending again.

After a group, the next stage's jobs do not get the group's results copied
into their payload: they carry ``"results_of": {"bid", "count"}`` (the
group's batch and its size), and the worker reads the list, in order, when
the job starts (``workflows/results.py``), however large the group.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from redis.asyncio import Redis

from cogworker_async import payload
from cogworker_async.context import worker_services
from cogworker_async.errors import DependencyFailed, JobAborted
from cogworker_async.jobs import job
from cogworker_async.keys import Keys
from cogworker_async.store import batch_results, batches
from cogworker_async.store.batches import Callback, Opened

STEP_NAME = "cogworker.flow_step"
FLOW_KEEP = 86_400.0  # s a flow's results are kept at least: the next stage reads them
DEPENDENCY_FAILED = DependencyFailed.__name__
ADD_CHUNK = 500  # members a batch_add call adds (Lua's unpack takes a few thousand at most)


def _step_callback(flow: dict[str, Any], index: int, now: float) -> Callback:
    """The job that starts stage ``index``, on the queue of its first job."""
    queue = flow["stages"][index]["jobs"][0]["queue"]
    built = payload.build(STEP_NAME, [flow, index], None, queue, now=now)
    return Callback(queue, payload.encode(built))


async def start_stage(
    redis: Redis,
    keys: Keys,
    flow: dict[str, Any],
    index: int,
    given: tuple[Any, ...] = (),
    results_of: dict[str, Any] | None = None,
) -> bool:
    """Start stage ``index`` of ``flow``, ``given`` (the previous result, or nothing)
    first in each job's arguments, or ``results_of`` (a group's batch: its results,
    read when each job starts) in their payload. False when it was started already."""
    stage = flow["stages"][index]
    bid = stage["bid"]
    now = time.time()
    callbacks = {}
    if index + 1 < len(flow["stages"]):
        callbacks["complete"] = _step_callback(flow, index + 1, now)
    opened = await batches.open_batch(
        redis,
        keys,
        bid=bid,
        created_at=now,
        description=f"flow stage {index + 1} of {len(flow['stages'])}",
        callbacks=callbacks,
        results_by_token=True,  # its list is its group's, in order (below)
    )
    if opened is not Opened.OPENED:
        found = await batches.read_batch(redis, keys, bid)
        if found is None or found.get("state") != "open":
            return False
    # Added in the group's order (a chord's callback reads the results in the
    # order the batch lists them), a chunk a call, split where the queue
    # changes; the chunks are the same on every run, so each has its token.
    chunk: list[tuple[str, bytes]] = []
    queue = ""
    sent = 0

    async def send() -> None:
        nonlocal sent
        if chunk:
            await batches.add_members(
                redis,
                keys,
                bid=bid,
                queue=queue,
                members=chunk,
                once=f"chunk:{sent}",
                keep_results=True,  # every flow job keeps its result (FLOW_KEEP)
            )
            sent += 1
            chunk.clear()

    for member in stage["jobs"]:
        body = orjson.loads(member["payload"])
        body["args"] = [*given, *body.get("args", [])]
        if results_of is not None:
            body["results_of"] = results_of
        body["batch"] = bid
        body["enqueued_at"] = now
        if member["queue"] != queue or len(chunk) >= ADD_CHUNK:
            await send()
            queue = member["queue"]
        chunk.append((member["jid"], payload.encode(body)))
    await send()
    await batches.close_batch(redis, keys, bid)
    return True


async def _fail_from(
    redis: Redis,
    keys: Keys,
    flow: dict[str, Any],
    index: int,
    error_class: str = DEPENDENCY_FAILED,
) -> None:
    """Stage ``index`` and every later one end as failed (``DependencyFailed``, or
    ``JobAborted`` for an aborted flow): their result waiters hear it; none runs."""
    if error_class == DEPENDENCY_FAILED:
        message = f"stage {index} of the flow did not all succeed"
    else:
        message = "the flow was aborted"
    jids = [m["jid"] for stage in flow["stages"][index:] for m in stage["jobs"]]
    await batches.fail_results(
        redis, keys, jids, error_class=error_class, message=message, keep=FLOW_KEEP
    )


@job(name=STEP_NAME, retry=25)
async def flow_step(flow: dict[str, Any], index: int) -> None:
    """Start stage ``index`` of ``flow`` (its batch's callback: the previous stage ended),
    as the edge's ``if_failed`` says when the previous stage did not all succeed."""
    redis, keys = worker_services()
    previous = flow["stages"][index - 1]
    found = await batches.read_batch(redis, keys, previous["bid"])
    succeeded = found is not None and found.get("succeeded") == found.get("total")
    policy = flow["stages"][index]["if_failed"]
    if found is not None and found.get("aborted"):
        # The flow was aborted (client.abort_flow): nothing after it runs.
        await _fail_from(redis, keys, flow, index, error_class=JobAborted.__name__)
        return
    if not succeeded and policy == "drop":
        return
    if not succeeded and policy == "fail":
        await _fail_from(redis, keys, flow, index)
        return
    if previous["group"]:
        # A reference, not the list: each job reads it when it starts.
        group = {"bid": previous["bid"], "count": len(previous["jobs"])}
        await start_stage(redis, keys, flow, index, results_of=group)
        return
    value = await batch_results.read_result(redis, keys, previous["jobs"][0]["jid"])
    await start_stage(redis, keys, flow, index, (value,))


FLOW_STEP = flow_step
