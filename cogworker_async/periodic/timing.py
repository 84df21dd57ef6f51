"""Slot arithmetic as pure functions of ``now`` (epoch seconds, Redis's clock).

A slot is the epoch second an entry is due at: ``every(n)`` slots are the
multiples of ``n`` since the Unix epoch; ``cron`` slots are what cronsim
yields in the entry's zone (a wall time skipped by a spring-forward runs at
the end of the gap, a wall time repeated by a fall-back runs once, at its
first occurrence: Debian cron's rules).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
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


# How late a slot may be claimed and still count as on time: half the entry's
# interval, at least ON_TIME_MIN (a loaded machine's tick jitter) and at most
# ON_TIME_MAX. A slot later than that was missed (Redis was away, no process
# ticked it, the loop stalled): misfire="skip" never runs it, "run_once" runs
# the latest missed slot once when no on-time slot of the same tick runs.
ON_TIME_MIN = 2.0
ON_TIME_MAX = 60.0
# A claim key outlives its on-time window by this margin: a process that read
# Redis's clock and sent its claim this much later could otherwise claim the
# slot again after the key expired. Three intervals, at least CLAIM_MARGIN_MIN
# (a tick that stalls between its clock read and its claims) and at most
# CLAIM_MARGIN_MAX beyond that (bounded: the key count per entry stays constant).
CLAIM_MARGIN_MIN = 60.0
CLAIM_MARGIN_INTERVALS = 3


def typical_interval(entry: Entry, now: float) -> float:
    """The gap between the entry's next two slots after ``now`` (cron: its real interval,
    which may vary; this one sizes the on-time window and the claim key's life)."""
    if entry.seconds is not None:
        return entry.seconds
    first = next_slot(entry, now)
    return next_slot(entry, first) - first


def on_time_window(interval: float) -> float:
    """How late (s) a slot of an entry with this interval may still be claimed on time."""
    return min(ON_TIME_MAX, max(ON_TIME_MIN, interval / 2))


def claim_life(slot: float, now: float, interval: float) -> float:
    """Seconds from ``now`` the claim key of ``slot`` must live: until the slot can no
    longer be claimed on time, plus the margin. At least a second."""
    margin = max(CLAIM_MARGIN_MIN, CLAIM_MARGIN_INTERVALS * interval)
    return max(1.0, slot + on_time_window(interval) + margin - now)


@dataclass(frozen=True, slots=True)
class Due:
    """The slots in ``(after, now]``: those still on time (oldest first), and the first
    and last of those missed (None: none missed)."""

    on_time: list[float]
    first_missed: float | None = None
    last_missed: float | None = None


def due_slots(entry: Entry, after: float, now: float, window: float) -> Due:
    """The slots of ``(after, now]``, split at ``now - window``: older ones were missed.

    Only the on-time slots and the two ends of the missed ones are computed, so a
    tick after a long outage costs no more than one on time (an every-second
    cron after an hour away walks two slots, not 3,600)."""
    cut = now - window
    on_time: list[float] = []
    slot = next_slot(entry, max(after, cut))
    while slot <= now:
        on_time.append(slot)
        slot = next_slot(entry, slot)
    first = next_slot(entry, after)
    if first > cut:
        return Due(on_time)
    last = latest_slot(entry, cut)
    return Due(on_time, first, last if last is not None and last > after else first)
