"""On shutdown a job goes back to the queue it was fetched from (issue 12, item 1).

A payload may name another queue than the one it sat on (pushed there by
another producer, or moved between queues by hand). Requeued by its payload,
it landed on a queue this worker, and maybe every worker, does not read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import Settings, Worker, job
from cogworker_async.keys import Keys
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

STARTED: list[str] = []


@job(name="source.hold")
async def hold(tag: str) -> None:
    STARTED.append(tag)
    await anyio.sleep(60)


def _payload(tag: str, queue: str) -> bytes:
    now = time.time()
    return orjson.dumps(
        {
            "jid": f"{abs(hash(tag)) % 16**24:024x}",
            "class": "source.hold",
            "args": [tag],
            "queue": queue,
            "created_at": now,
            "enqueued_at": now,
        }
    )


async def _queued(redis: Redis, keys: Keys, queue: str) -> list[str]:
    return sorted(
        orjson.loads(raw)["args"][0] for raw in await redis.lrange(keys.queue(queue), 0, -1)
    )


async def _stop_after_start(worker: Worker, count: int) -> None:
    async def all_started() -> bool:
        return len(STARTED) >= count

    await wait_for(all_started)
    worker.stop()
    worker.stop()  # the second stop skips the wait: the handlers are cancelled now


async def test_one_queue_worker_requeues_to_its_queue_not_the_payloads(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    STARTED.clear()
    settings = settings.model_copy(update={"queues": ("slow",)})
    await redis.lpush(keys.queue("slow"), _payload("moved", "mail"), _payload("own", "slow"))
    with caplog.at_level(logging.INFO, logger="cogworker_async"):
        async with Worker(settings, jobs=[hold]) as worker:
            await _stop_after_start(worker, 2)
    assert await _queued(redis, keys, "slow") == ["moved", "own"]
    assert not await redis.exists(keys.queue("mail"))
    assert "requeued 2 job(s): slow 2" in caplog.messages


async def test_several_queues_each_job_back_where_it_was_fetched(
    settings: Settings, redis: Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    STARTED.clear()
    settings = settings.model_copy(update={"queues": ("a", "b")})
    await redis.lpush(keys.queue("b"), _payload("on-b-says-a", "a"), _payload("on-b", "b"))
    await redis.lpush(keys.queue("a"), _payload("on-a", "a"), _payload("on-a-says-gone", "gone"))
    with caplog.at_level(logging.INFO, logger="cogworker_async"):
        async with Worker(settings, jobs=[hold]) as worker:
            await _stop_after_start(worker, 4)
    assert await _queued(redis, keys, "a") == ["on-a", "on-a-says-gone"]
    assert await _queued(redis, keys, "b") == ["on-b", "on-b-says-a"]
    assert not await redis.exists(keys.queue("gone"))
    assert "requeued 4 job(s): a 2, b 2" in caplog.messages


async def test_no_blocking_wait_lands_after_the_requeue(
    settings: Settings, redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker runs one job, its other processors idle in the blocking wait (BLMOVE
    into its list); it is stopped, its job cut off and requeued. The wait must be
    over on the server before that requeue, else it takes the requeued job back
    onto the list of a process that has left (only orphan recovery finds it)."""
    from cogworker_async.worker import fetcher

    STARTED.clear()
    settings = settings.model_copy(update={"queues": ("slow",), "fetch_idle_max_interval": 4.0})
    real_wait = fetcher.wait_for_work

    async def close_arrives_late(*args: Any, **kwargs: Any) -> Any:
        # A cancelled wait whose close has not reached Redis yet: the caller is
        # cut off at once, the BLMOVE stays blocked on the server (deterministic).
        return await asyncio.shield(real_wait(*args, **kwargs))

    monkeypatch.setattr(fetcher, "wait_for_work", close_arrives_late)
    await redis.lpush(keys.queue("slow"), _payload("own", "slow"))

    async def blocked() -> bool:
        return int((await redis.info("clients"))["blocked_clients"]) >= 1

    async with Worker(settings, jobs=[hold]) as worker:
        await wait_for(lambda: _started(1))
        await wait_for(blocked)
        started = time.monotonic()
        worker.stop()
        worker.stop()  # the handler is cancelled at once: its job is requeued
    assert time.monotonic() - started < 3.0  # the wait was ended, not sat out
    assert await _queued(redis, keys, "slow") == ["own"]
    assert not await redis.exists(keys.in_progress(worker.identity))


async def _started(count: int) -> bool:
    return len(STARTED) >= count
