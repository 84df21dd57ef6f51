"""``cogworker-async worker`` waiting for Redis at start, as an embedded worker does.

A worker started before its Redis (a compose file, a laptop whose Redis is
still booting) waits for it: one log line naming the address, a ping again
with a back-off, and a clean stop (exit 0) on SIGTERM/SIGINT meanwhile. What
waiting cannot fix (a wrong password, no such database) is raised at once, for
the caller's one-line error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.asyncio import Redis

from cogworker_async.cli.errors import is_auth_failure
from cogworker_async.store.faults import is_outage
from cogworker_async.worker.signals import stop_on_signals

FIRST_RETRY = 0.1  # seconds: a Redis started alongside is usually up within this
MAX_RETRY = 2.0  # seconds: how late a worker may notice its Redis came


async def wait_for_redis(redis: Redis, where: str, log: logging.Logger) -> bool:
    """Ping ``redis`` until it answers (True), or until a stop signal (False).

    ``where`` is the masked address logged while waiting. An error that is no
    outage (authentication, a bad DB index) is raised: waiting cannot fix it.
    """
    stopping = asyncio.Event()
    delay = FIRST_RETRY
    waited = False
    with stop_on_signals(stopping.set, log):
        while not stopping.is_set():
            try:
                await redis.ping()
            except Exception as exc:  # why: an outage waits, anything else is raised
                if is_auth_failure(exc) or not is_outage(exc):
                    raise
                if not waited:
                    log.warning("waiting for Redis at %s (%s)", where, exc)
                    waited = True
            else:
                if waited:
                    log.info("Redis at %s answers: starting", where)
                return True
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await stopping.wait()
            delay = min(delay * 2, MAX_RETRY)
    log.info("stopped while waiting for Redis at %s", where)
    return False
