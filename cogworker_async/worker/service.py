"""One loop helper for every periodic duty.

Each iteration is isolated: an exception is logged and the loop goes on.
Failures are logged once per episode (``FailureLog``: the first failure of
each kind, then one line when the duty recovers), never a traceback per
iteration, and a ``WRONGTYPE`` reply wakes the key guard. A duty that saw the
connection drop comes back after a short jittered delay instead of a whole
period. Cancellation is never swallowed (only ``Exception`` is caught).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable

import anyio

from cogworker_async.store.faults import FailureLog, is_outage

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
    on_wrong_type: Callable[[], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> None:
    """Run ``once`` every ``next_interval()`` s. ``sleep``: how to wait between passes
    (the key guard's can be woken early)."""
    failures = FailureLog(name, logger, on_wrong_type=on_wrong_type)
    await sleep(next_interval() if first_delay is None else first_delay)
    while True:
        try:
            await once()
        except Exception as exc:  # noqa: BLE001 - one pass failing must not end the duty
            failures.failed(exc)
            if is_outage(exc):
                if on_outage is not None:
                    await on_outage()
                await anyio.sleep(OUTAGE_RETRY * (0.5 + rng.random()))
                continue
        else:
            failures.succeeded()
        await sleep(next_interval())
