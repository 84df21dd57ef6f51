"""One loop helper for every periodic duty.

Each iteration is isolated: an exception is logged and the loop goes on. An
outage is logged once when it starts and once when it ends, and a duty that
saw the connection drop comes back after a short jittered delay instead of a
whole period. Cancellation is never swallowed (only ``Exception`` is caught).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable

import anyio

from cogworker_async.store.faults import OutageLog, is_outage

OUTAGE_RETRY = 1.0


async def run_duty(
    name: str,
    once: Callable[[], Awaitable[object]],
    next_interval: Callable[[], float],
    logger: logging.Logger,
    *,
    rng: random.Random,
    first_delay: float | None = None,
    on_outage: Callable[[], Awaitable[None]] | None = None,
) -> None:
    outage = OutageLog(name, logger)
    await anyio.sleep(next_interval() if first_delay is None else first_delay)
    while True:
        try:
            await once()
        except Exception as exc:
            if is_outage(exc):
                outage.failed(exc)
                if on_outage is not None:
                    await on_outage()
                await anyio.sleep(OUTAGE_RETRY * (0.5 + rng.random()))
                continue
            logger.exception("%s failed (a bug: please report it); trying again later", name)
        else:
            outage.succeeded()
        await anyio.sleep(next_interval())
