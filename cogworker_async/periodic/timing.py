"""Slot arithmetic as pure functions of ``now`` (epoch seconds, Redis's clock).

A slot is the epoch second an entry is due at: ``every(n)`` slots are the
multiples of ``n`` since the Unix epoch; ``cron`` slots are what cronsim
yields in the entry's zone (a wall time skipped by a spring-forward runs at
the end of the gap, a wall time repeated by a fall-back runs once, at its
first occurrence: Debian cron's rules).
"""

from __future__ import annotations

import math
from datetime import datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim

from cogworker_async.periodic.entries import Entry


def next_slot(entry: Entry, now: float) -> float:
    """The first slot strictly after ``now``."""
    if entry.seconds is not None:
        step = entry.seconds
        slot = (math.floor(now / step) + 1) * step
        return slot if slot > now else slot + step
    assert entry.expression is not None
    start = datetime.fromtimestamp(now, ZoneInfo(entry.tz))
    for found in CronSim(entry.expression, start):
        if found.timestamp() > now:
            return found.timestamp()
    raise ValueError(f"{entry.expression!r} has no future slot")  # pragma: no cover


def latest_slot(entry: Entry, now: float) -> float | None:
    """The last slot at or before ``now`` (None: none in the last year or so)."""
    if entry.seconds is not None:
        return math.floor(now / entry.seconds) * entry.seconds
    assert entry.expression is not None
    start = datetime.fromtimestamp(math.floor(now) + 1, ZoneInfo(entry.tz))
    for found in CronSim(entry.expression, start, reverse=True):
        if found.timestamp() <= now:
            return found.timestamp()
    return None  # pragma: no cover


def slots_between(entry: Entry, after: float, until: float, limit: int = 16) -> list[float]:
    """The slots in ``(after, until]``, oldest first, at most the ``limit`` latest."""
    found: list[float] = []
    slot = next_slot(entry, after)
    while slot <= until:
        found.append(slot)
        if len(found) > limit:
            found.pop(0)
        slot = next_slot(entry, slot)
    return found


def catch_up_slot(entry: Entry, now: float, last: float | None) -> float | None:
    """At start: the missed slot a ``run_once`` entry runs (None: nothing to run).

    ``last`` is the persisted last slot run of this entry (None: never ran, so
    nothing was missed). ``skip`` never runs a missed slot.
    """
    if entry.misfire != "run_once" or last is None:
        return None
    slot = latest_slot(entry, now)
    if slot is None or slot <= last:
        return None
    if entry.grace is not None and now - slot > entry.grace:
        return None
    return slot
