"""Jobs that tests run in subprocess workers; each records its runs in Redis."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import redis as sync_redis
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, TimeoutError

from cogworker_async import current_job, job

_client: Redis | None = None


def _redis() -> Redis:
    global _client  # noqa: PLW0603 - one client per worker process
    if _client is None:
        # The recording client rides out outages, so a test's bookkeeping never
        # fails the job it watches.
        url = os.environ["COGWORKER_REDIS_URL"]
        if url.startswith("redis+cluster://"):  # tests/cluster: the workers' own kind of client
            from cogworker_async.settings import Settings
            from cogworker_async.store.connection import connect

            _client = connect(Settings(redis_url=url, namespace=os.environ["COGWORKER_NAMESPACE"]))
            return _client
        _client = Redis.from_url(
            url,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 60),
            retry_on_error=[ConnectionError, TimeoutError],
        )
    return _client


def _runs_key() -> str:
    return f"{os.environ['COGWORKER_NAMESPACE']}:test:runs"


# One entry per call, however often the client resends it: a push whose reply
# was lost to an outage is retried, and a plain RPUSH would then record one
# run twice (a duplicate that never ran). The token makes the resend a no-op.
_PUSH_ONCE = """
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', 3600) then
  return redis.call('RPUSH', KEYS[1], ARGV[1])
end
return 0
"""


async def _record(tag: str = "") -> None:
    entry = f"{current_job().jid}{tag}"
    if os.environ["COGWORKER_REDIS_URL"].startswith("redis+cluster://"):
        # The cluster client never resends (store.connection): a plain push.
        await _redis().rpush(_runs_key(), entry)
        return
    token = f"{os.environ['COGWORKER_NAMESPACE']}:test:token:{uuid.uuid4().hex}"
    await _redis().eval(_PUSH_ONCE, 2, _runs_key(), token, entry)


@job(name="t.record")
async def record(i: int) -> None:
    await _record()


@job(name="t.sleep")
async def sleep_then_record(seconds: float) -> None:
    await _record(":start")
    await asyncio.sleep(seconds)
    await _record(":done")


@job(name="t.sync_sleep")
def sync_sleep(seconds: float) -> None:
    time.sleep(seconds)
    client = sync_redis.Redis.from_url(os.environ["COGWORKER_REDIS_URL"])
    client.rpush(_runs_key(), f"{current_job().jid}:done")
    client.close()


@job(name="t.cpu_hog")
async def cpu_hog(seconds: float) -> None:
    """Blocks the event loop (a CPU-bound async def): the heartbeat must still beat."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    await _record(":done")


@job(name="t.suicide")
async def suicide() -> None:
    await _record(":start")
    os._exit(1)


@job(name="t.work")
async def work(i: int) -> None:
    await asyncio.sleep(0.005)
    await _record()
