"""A success's result and final status ride its ack (issue 22 §3): written in the
step that removes the job from the in-progress list, so whoever sees the job
gone sees its result and its final status; no snapshot ever shows a job off
its queue and off the list without them."""

from __future__ import annotations

import asyncio
import random

import pytest
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.keys import Keys
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

JOBS = 300


@job(name="ack_end.tracked", keep_result=60, status=True)
async def tracked(n: int) -> int:
    await asyncio.sleep(random.random() * 0.004)
    return n * 2


async def test_a_result_is_visible_no_later_than_the_job_leaves_in_progress(
    settings: Settings, redis: Redis, keys: Keys
) -> None:
    async with Client(settings) as client:
        handles = [await client.enqueue(tracked, n) for n in range(JOBS)]
        jids = [h.jid for h in handles if h is not None]
        assert len(jids) == JOBS
        async with Worker(settings, jobs=[tracked]) as worker:
            in_progress = keys.in_progress(worker.identity)
            violations: list[str] = []
            ended_seen = 0

            async def all_ended() -> bool:
                """One atomic snapshot (MULTI): queue, in-progress list, every end."""
                nonlocal ended_seen
                pipe = redis.pipeline(transaction=True)
                pipe.lrange(keys.queue("default"), 0, -1)
                pipe.lrange(in_progress, 0, -1)
                for jid in jids:
                    pipe.exists(keys.result(jid))
                    pipe.hget(keys.status(jid), "state")
                queued, listed, *ends = await pipe.execute()
                waiting = b"".join(queued) + b"".join(listed)
                ended = 0
                for i, jid in enumerate(jids):
                    if jid.encode() in waiting:
                        continue
                    ended += 1
                    has_result, state = ends[2 * i], ends[2 * i + 1]
                    if not has_result or state != b"complete":
                        violations.append(f"{jid}: gone, result={has_result} state={state!r}")
                ended_seen = max(ended_seen, ended if ended < JOBS else ended_seen)
                return ended == JOBS

            try:
                await wait_for(all_ended, timeout=60, interval=0.002)
            except TimeoutError:
                # Once seen in a loaded CI run (no warning logged): say where the
                # unfinished jobs are, and what the worker holds, for the next look.
                queued = await redis.lrange(keys.queue("default"), 0, -1)
                listed = await redis.lrange(in_progress, 0, -1)
                parts = worker.parts
                held = (
                    {
                        "running": len(parts.processors.running),
                        "ready": len(parts.fetcher.handout.ready),
                        "fetching": parts.fetcher.fetching,
                        "acks_out": parts.fetcher.acks_out,
                        "freeze_checks": parts.processors.freeze.checks
                        if parts.processors.freeze is not None
                        else None,
                    }
                    if parts is not None
                    else "not started"
                )
                raise AssertionError(
                    f"not every job ended in 60 s: {len(queued)} queued, {len(listed)} "
                    f"on the in-progress list; the worker: {held}"
                ) from None
        assert violations == []
        # The snapshots did see jobs end one batch at a time, not only all at once.
        assert ended_seen > 0
        assert [await h.result(timeout=10) for h in handles if h is not None] == [
            n * 2 for n in range(JOBS)
        ]
