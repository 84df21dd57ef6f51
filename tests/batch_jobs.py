"""Jobs of the batch chaos test (tests/chaos/test_batch_crashes.py), run by worker
subprocesses: ``cogworker-async worker tests.batch_jobs``.

A member sleeps a little and notes each run it finished; ``inc`` and
``total`` are the steps of the chains and chords run beside the batches. The
callback job goes to its own queue, which the chaos tests leave unread: that
queue is their ledger of how often each callback was enqueued.
"""

from __future__ import annotations

import asyncio
import os

from redis.asyncio import Redis

from cogworker_async import current_job, job

_client: Redis | None = None


def runs_key(namespace: str) -> str:
    return f"{namespace}:test:member_runs"


def callbacks_key(namespace: str) -> str:
    return f"{namespace}:test:callback_runs"


def _redis() -> Redis:
    global _client  # noqa: PLW0603 - one client per worker process
    if _client is None:
        _client = Redis.from_url(os.environ["COGWORKER_REDIS_URL"])
    return _client


@job(name="bc.member")
async def member(seconds: float) -> None:
    await asyncio.sleep(seconds)
    await _redis().hincrby(runs_key(os.environ["COGWORKER_NAMESPACE"]), current_job().jid, 1)


@job(name="bc.callback", queue="callbacks")
async def callback() -> None:
    field = current_job().payload["batch_callback"]
    await _redis().hincrby(
        callbacks_key(os.environ["COGWORKER_NAMESPACE"]), f"{field['bid']}:{field['event']}", 1
    )


@job(name="bc.inc", keep_result=600)
async def inc(x: int, pause: float = 0.1) -> int:
    await asyncio.sleep(pause)
    return x + 1


@job(name="bc.total", keep_result=600)
async def total(values: list[int]) -> int:
    return sum(values)
