"""A job that writes each start and end to a ledger in Redis: who ran what, when, in which process.

For the fair-dispatch, pause and freeze tests (tests/chaos/test_fair_dispatch.py),
whose workers run ``cogworker-async worker tests.ledger_jobs``.
"""

from __future__ import annotations

import asyncio
import os
import time

import orjson
from redis.asyncio import Redis

from cogworker_async import current_job, job

_client: Redis | None = None


def ledger_key(namespace: str) -> str:
    return f"{namespace}:test:ledger"


async def _write(event: str) -> None:
    global _client  # noqa: PLW0603 - one client per worker process
    if _client is None:
        # A generous read timeout: the freeze test stops this process (SIGSTOP)
        # for seconds with a write's reply unread; a short timeout would fail
        # the job on resume, for the ledger's sake, not the worker's.
        _client = Redis.from_url(os.environ["COGWORKER_REDIS_URL"], socket_timeout=120)
    entry = {"jid": current_job().jid, "event": event, "pid": os.getpid(), "at": time.time()}
    await _client.rpush(ledger_key(os.environ["COGWORKER_NAMESPACE"]), orjson.dumps(entry))


@job(name="ledger.sleep")
async def sleep_in_ledger(seconds: float) -> None:
    await _write("start")
    await asyncio.sleep(seconds)
    await _write("end")
