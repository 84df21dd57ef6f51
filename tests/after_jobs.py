"""Jobs of the after=[...] kill -9 test (tests/chaos/test_after_crashes.py), run by
worker subprocesses: ``cogworker-async worker tests.after_jobs``.

``first_run_hangs`` notes each run and hangs on its first (the test SIGKILLs
the worker running it there); ``note`` notes each run: the ledger is a hash
of runs per jid in the test's namespace.
"""

from __future__ import annotations

import asyncio
import os

from redis.asyncio import Redis

from cogworker_async import current_job, job

_client: Redis | None = None


def runs_key(namespace: str) -> str:
    return f"{namespace}:test:after_runs"


def _redis() -> Redis:
    global _client  # noqa: PLW0603 - one client per worker process
    if _client is None:
        _client = Redis.from_url(os.environ["COGWORKER_REDIS_URL"])
    return _client


@job(name="aj.first_run_hangs")
async def first_run_hangs() -> None:
    runs = await _redis().hincrby(runs_key(os.environ["COGWORKER_NAMESPACE"]), current_job().jid, 1)
    if runs == 1:
        await asyncio.sleep(3600)


@job(name="aj.note")
async def note() -> None:
    await _redis().hincrby(runs_key(os.environ["COGWORKER_NAMESPACE"]), current_job().jid, 1)
