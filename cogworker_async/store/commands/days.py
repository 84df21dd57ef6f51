"""The UTC day a per-day stat is counted under, and how long such a counter is kept."""

from __future__ import annotations

import functools
import time

from cogworker_async.store import run_history as history

DAY_STAT_TTL = history.DAY_TTL


def today(now: float | None = None) -> str:
    """The UTC day a per-day stat is counted under."""
    return day_name(int((time.time() if now is None else now) // 86_400))


@functools.lru_cache(maxsize=4)
def day_name(day: int) -> str:
    # Every fetch names today's counter: formatted once a day, not once a call.
    return time.strftime("%Y-%m-%d", time.gmtime(day * 86_400))
