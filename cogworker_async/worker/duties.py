"""The background duties of a worker, declared one way: a ``Duty`` (its name, how
it runs once, how long until the next run) made from the worker's ``Parts``
(what it needs) by one of ``DUTIES``, each started as a ``run_duty`` loop in
the duties group by ``start_duties``. A new duty is a function added there."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.connection import connect, discovered, drop_idle_connections
from cogworker_async.store.limits import limits_due
from cogworker_async.store.replies import text
from cogworker_async.timing import jittered, scaled_poll_interval
from cogworker_async.worker.assembly import Parts
from cogworker_async.worker.scheduler import ScheduledPoller
from cogworker_async.worker.service import run_duty

RECONCILE_INTERVAL = 5.0
RELEASE_INTERVAL = 5.0  # s between passes of the deferred unique-lock releases
LIMIT_TIMER_MAX = 1.0  # s at most between looks for window limits that reopened
# The scheduled poller's idle cost stays that of its old fixed-interval poll
# (4 commands a poll): a look is 3 (TIME, 2 × ZRANGE), the live-process count
# (2) is read again after LIVE_REFRESH_POLLS average polls of this process
# (once two reads in a row agreed), and the wake-up listener's BZPOPMIN times
# out every LISTEN_POLLS of them (at most LISTEN_MAX s: its connection's
# socket timeout is raised by that much).
LIVE_REFRESH_POLLS = 4
LISTEN_POLLS = 4
LISTEN_MAX = 120.0


async def live_processes(redis: Redis, keys: Keys) -> int:
    """How many processes have a presence key now (at least 1: this one).

    Not the size of the process set: an entry stays there until recovery
    prunes it, and the poll interval must not grow with every crash.
    """
    members = await redis.smembers(keys.processes)
    if not members:
        return 1
    presence = [keys.process(text(m)) for m in members]
    return int(await redis.exists(*presence)) or 1


@dataclass(frozen=True, slots=True)
class Duty:
    """One background duty of a worker.

    ``once`` runs one pass, again every ``interval()`` s (read after each pass:
    it may scale or jitter), first after ``first_delay`` s (None: one interval)
    and waiting with ``sleep`` (a duty woken early passes its own). With
    ``interval`` None, ``once`` is a listener that runs for the worker's life.
    """

    name: str
    once: Callable[[], Awaitable[object]]
    interval: Callable[[], float] | None
    first_delay: float | None = None
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep


class _LiveCount:
    """How many processes are alive, as the scheduled poller last read it: each of N
    processes polls every N × average, so the total rate stays flat."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts
        self.count = 1
        self._last = 0  # the previous count read (0: none yet)
        self._refresh_at = 0.0

    async def refresh(self) -> None:
        if time.monotonic() < self._refresh_at:
            return
        count = await live_processes(self._parts.redis, self._parts.keys)
        # Read again at the next poll until two reads agree (processes
        # starting together see each other only after their first beats).
        # (0.5 of an average interval: the shortest draw, so the very next poll.)
        polls = LIVE_REFRESH_POLLS if count == self._last else 0.5
        self._last = self.count = count
        interval = self._parts.settings.scheduled_poll_interval
        self._refresh_at = time.monotonic() + polls * interval * count


def scheduled_poller(parts: Parts) -> list[Duty]:
    """The poll that moves due scheduled jobs onto their queues, and its wake-up
    listener (a blocking read on its own connection)."""
    settings, rng = parts.settings, parts.rng
    poller = ScheduledPoller(parts.redis, parts.keys, parts.logger)
    live = _LiveCount(parts)

    async def poll() -> None:
        await live.refresh()
        await poller.poll_once()

    async def listen() -> None:
        longer = settings.socket_timeout + LISTEN_MAX
        blocking = connect(
            settings.model_copy(update={"socket_timeout": longer}), max_connections=1
        )
        try:
            await discovered(blocking, settings.socket_timeout)
            await poller.listen(
                blocking,
                lambda: min(
                    LISTEN_MAX, LISTEN_POLLS * settings.scheduled_poll_interval * live.count
                ),
                rng,
                on_wrong_type=parts.key_guard.request_check,
            )
        finally:
            with anyio.CancelScope(shield=True):
                await blocking.aclose()

    return [
        Duty(
            "Scheduled poller",
            poll,
            lambda: scaled_poll_interval(settings.scheduled_poll_interval, live.count, rng),
            first_delay=rng.random() * min(1.0, settings.scheduled_poll_interval),
            sleep=poller.wait,
        ),
        Duty("Scheduled poller wake-up", listen, None),
    ]


def orphan_recovery(parts: Parts) -> list[Duty]:
    """Requeue the in-progress jobs of dead processes (reliable mode only)."""
    if parts.recovery is None:
        return []
    interval = parts.settings.orphan_check_interval
    return [
        Duty(
            "Orphan recovery",
            parts.recovery.pass_once,
            lambda: jittered(interval, parts.rng),
            first_delay=parts.rng.random() * min(1.0, interval),
        )
    ]


def reconcile(parts: Parts) -> list[Duty]:
    """Compare this process's in-progress list with what it holds in memory."""
    interval = min(RECONCILE_INTERVAL, parts.settings.orphan_check_interval)
    return [Duty("Reconcile", parts.reconciler.once, lambda: jittered(interval, parts.rng))]


def key_guard(parts: Parts) -> list[Duty]:
    """Check the namespace's keys are of the types written (woken by a WRONGTYPE)."""
    guard, interval = parts.key_guard, parts.settings.key_check_interval
    return [
        Duty(
            "Key guard",
            guard.check_once,
            lambda: jittered(interval, parts.rng),
            sleep=guard.wait,
        )
    ]


def periodic_ticker(parts: Parts) -> list[Duty]:
    """Claim and push the due slots of the periodic entries (if there are any)."""
    if parts.ticker is None:
        return []
    return [Duty("Periodic ticker", parts.ticker.tick, parts.ticker.interval)]


def abort_watch(parts: Parts) -> list[Duty]:
    """The abort listener, and the tombstone check that goes with each beat."""
    interval = parts.settings.heartbeat_interval
    return [
        Duty("Abort listener", parts.aborts.listen, None),
        Duty("Abort check", parts.aborts.check_once, lambda: interval),
    ]


def unique_releases(parts: Parts) -> list[Duty]:
    """Failed unique-lock releases, and those stopped workers handed over."""
    interval = min(RELEASE_INTERVAL, parts.settings.orphan_check_interval)
    return [Duty("Unique releases", parts.releases.once, lambda: interval)]


class _LimitTimers:
    """When the next window limit reopens, as the last pass read it."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts
        self.next_in: float | None = None

    async def once(self) -> None:
        self.next_in = await limits_due(self._parts.redis, self._parts.keys)

    def interval(self) -> float:
        # Until the next key is due (a window reopening lets its held jobs
        # in within ~10 ms); without one, a look every LIMIT_TIMER_MAX s finds
        # keys parked since (one call: a worker with no limits pays that much).
        if self.next_in is None:
            return jittered(LIMIT_TIMER_MAX, self._parts.rng)
        return min(LIMIT_TIMER_MAX, max(0.01, self.next_in + 0.005))


def limit_timers(parts: Parts) -> list[Duty]:
    """Let held jobs back in when their window limit reopens."""
    timers = _LimitTimers(parts)
    return [Duty("Limit timers", timers.once, timers.interval)]


DutyMaker = Callable[[Parts], list[Duty]]

DUTIES: tuple[DutyMaker, ...] = (
    scheduled_poller,
    orphan_recovery,
    reconcile,
    key_guard,
    periodic_ticker,
    abort_watch,
    unique_releases,
    limit_timers,
)
"""Every duty of a worker, in the order they start."""


def start_duties(group: TaskGroup, parts: Parts, makers: Sequence[DutyMaker] = DUTIES) -> None:
    """Start every duty in ``group``; a WRONGTYPE reply to any of them wakes the key
    guard at once, an outage drops the idle connections."""
    for make in makers:
        for duty in make(parts):
            group.start_soon(_runner(duty, parts), name=duty.name)


def _runner(duty: Duty, parts: Parts) -> Callable[[], Coroutine[Any, Any, None]]:
    async def run() -> None:
        if duty.interval is None:  # a listener: it runs for the worker's life
            await duty.once()
            return
        await run_duty(
            duty.name,
            duty.once,
            duty.interval,
            parts.logger,
            rng=parts.rng,
            first_delay=duty.first_delay,
            on_outage=lambda: drop_idle_connections(parts.redis),
            on_wrong_type=parts.key_guard.request_check,
            sleep=duty.sleep,
        )

    return run
