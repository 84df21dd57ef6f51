"""A job module with a lifespan, for subprocess workers (tests/integration/test_lifespan.py).

The lifespan's "pool" is a Redis client opened once per process: it records
``open:<pid>`` and, when closed, ``close:<pid>:<jobs it served>`` on
``<ns>:test:lifespan``; each job counts itself per pid in ``<ns>:test:uses``
through the pool, and fails if the pool is already closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from cogworker_async import job, lifespan_state


@dataclass
class Pool:
    client: Redis
    uses: int = 0
    closed: bool = False


def events_key() -> str:
    return f"{os.environ['COGWORKER_NAMESPACE']}:test:lifespan"


def uses_key() -> str:
    return f"{os.environ['COGWORKER_NAMESPACE']}:test:uses"


@contextlib.asynccontextmanager
async def worker_lifespan(_worker: Any) -> AsyncIterator[Pool]:
    """Found by ``cogworker-async worker tests.lifespan_jobs`` by its name."""
    pool = Pool(Redis.from_url(os.environ["COGWORKER_REDIS_URL"]))
    await pool.client.rpush(events_key(), f"open:{os.getpid()}")
    yield pool
    pool.closed = True
    await pool.client.rpush(events_key(), f"close:{os.getpid()}:{pool.uses}")
    await pool.client.aclose()


@contextlib.asynccontextmanager
async def failing_lifespan(_worker: Any) -> AsyncIterator[Pool]:
    raise RuntimeError("database unreachable")
    yield  # pragma: no cover - an async generator that fails before it yields


@job(name="lifespan.use")
async def use(seconds: float = 0.0) -> None:
    pool = lifespan_state(Pool)
    if pool.closed:
        raise RuntimeError("ran after the lifespan closed its pool")
    if seconds:
        await pool.client.rpush(events_key(), f"slow:{os.getpid()}")
        await asyncio.sleep(seconds)  # a job still running when SIGTERM comes
    await pool.client.hincrby(uses_key(), str(os.getpid()), 1)
    pool.uses += 1
