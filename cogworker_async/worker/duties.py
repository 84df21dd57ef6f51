"""The background duties of a worker, each one ``run_duty`` loop in the duties group."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect, discovered, drop_idle_connections
from cogworker_async.store.replies import text
from cogworker_async.timing import jittered, scaled_poll_interval
from cogworker_async.worker.keyguard import KeyGuard
from cogworker_async.worker.reconcile import Reconciler
from cogworker_async.worker.recovery import Recovery
from cogworker_async.worker.scheduler import ScheduledPoller
from cogworker_async.worker.service import run_duty

RECONCILE_INTERVAL = 5.0
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


def start_duties(
    group: TaskGroup,
    *,
    redis: Redis,
    keys: Keys,
    settings: Settings,
    rng: random.Random,
    logger: logging.Logger,
    recovery: Recovery | None,
    reconciler: Reconciler,
    key_guard: KeyGuard | None = None,
    extra: list[tuple[str, Callable[[], Awaitable[object]], Callable[[], float]]] = [],  # noqa: B006
) -> None:
    """Start the scheduled poller, orphan recovery (reliable mode), reconciliation and the
    key guard; a WRONGTYPE reply to any of them wakes the key guard at once."""
    poller = ScheduledPoller(redis, keys, logger)
    live = {"count": 1}
    refresh_at = {"live": 0.0}
    counted = {"last": 0}  # the previous count read (0: none yet)

    async def poll() -> None:
        # Each of N processes polls every N × average: the total rate stays flat.
        if time.monotonic() >= refresh_at["live"]:
            count = await live_processes(redis, keys)
            # Read again at the next poll until two reads agree (processes
            # starting together see each other only after their first beats).
            # (0.5 of an average interval: the shortest draw, so the very next poll.)
            polls = LIVE_REFRESH_POLLS if count == counted["last"] else 0.5
            counted["last"] = live["count"] = count
            refresh_at["live"] = time.monotonic() + (
                polls * settings.scheduled_poll_interval * count
            )
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
                    LISTEN_MAX, LISTEN_POLLS * settings.scheduled_poll_interval * live["count"]
                ),
                rng,
                on_wrong_type=None if key_guard is None else key_guard.request_check,
            )
        finally:
            with anyio.CancelScope(shield=True):
                await blocking.aclose()

    def start(
        name: str,
        once: Callable[[], Awaitable[object]],
        interval: Callable[[], float],
        first_delay: float | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        async def loop() -> None:
            await run_duty(
                name,
                once,
                interval,
                logger,
                rng=rng,
                first_delay=first_delay,
                on_outage=lambda: drop_idle_connections(redis),
                on_wrong_type=None if key_guard is None else key_guard.request_check,
                sleep=sleep,
            )

        group.start_soon(loop, name=name)

    start(
        "Scheduled poller",
        poll,
        lambda: scaled_poll_interval(settings.scheduled_poll_interval, live["count"], rng),
        first_delay=rng.random() * min(1.0, settings.scheduled_poll_interval),
        sleep=poller.wait,
    )
    group.start_soon(listen, name="Scheduled poller wake-up")
    if recovery is not None:
        start(
            "Orphan recovery",
            recovery.pass_once,
            lambda: jittered(settings.orphan_check_interval, rng),
            first_delay=rng.random() * min(1.0, settings.orphan_check_interval),
        )
    start(
        "Reconcile",
        reconciler.once,
        lambda: jittered(min(RECONCILE_INTERVAL, settings.orphan_check_interval), rng),
    )
    if key_guard is not None:
        start(
            "Key guard",
            key_guard.check_once,
            lambda: jittered(settings.key_check_interval, rng),
            sleep=key_guard.wait,
        )
    for name, once, interval in extra:
        start(name, once, interval)
