"""A worker's parts, built together once the fetch mode is known.

The order matters: the key guard first (every part that may meet a WRONGTYPE
reply wakes it), the settler before the fetcher (a missing ack is noted as a
duplicate by it), and the heartbeat last (it reports what the processors run).
The heartbeat runs in its own thread: what it has to say (a remote signal, a
WRONGTYPE) is handed to the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cogworker_async.jobs import JobRegistry
from cogworker_async.keys import Keys
from cogworker_async.middleware import ServerMiddleware
from cogworker_async.periodic.running import PeriodicRuns
from cogworker_async.settings import Settings
from cogworker_async.unique.releases import DeferredReleases
from cogworker_async.worker.fetcher import Fetcher
from cogworker_async.worker.heartbeat import Heartbeat
from cogworker_async.worker.keyguard import KeyGuard
from cogworker_async.worker.processor import Processors
from cogworker_async.worker.settlement import Settler
from cogworker_async.worker.tracking import Tracker


@dataclass(frozen=True, slots=True)
class Parts:
    key_guard: KeyGuard
    settler: Settler
    fetcher: Fetcher
    processors: Processors
    heartbeat: Heartbeat
    releases: DeferredReleases


def build_parts(
    redis: Any,
    blocking: Any,
    settings: Settings,
    keys: Keys,
    *,
    identity: str,
    registry: JobRegistry,
    middleware: list[ServerMiddleware],
    logger: logging.Logger,
    rng: random.Random,
    reliable: Callable[[], bool],
    known_jobs: Callable[[], list[bytes]],
    on_signal: Callable[[str], None],
) -> Parts:
    """Build the parts; on the event loop (the heartbeat's callbacks come back to it).

    ``known_jobs``: every in-progress job the process holds in memory (what
    the fetcher may forget the source queue of: none of these). ``on_signal``:
    a remote signal the heartbeat read, called on the loop.
    """
    # First: every part that may meet a WRONGTYPE reply wakes it.
    key_guard = KeyGuard(
        redis,
        keys,
        settings,
        identity=identity,
        queues=[s.name for s in settings.queue_specs],
        logger=logger,
    )
    settler = Settler(
        redis,
        keys,
        settings,
        identity=identity,
        logger=logger,
        rng=rng,
        on_wrong_type=key_guard.request_check,
        listed=reliable(),
    )
    fetcher = Fetcher(
        redis,
        blocking,
        keys,
        identity=identity,
        queues=settings.queue_specs,
        strict_order=settings.strict_order,
        reliable=reliable(),
        idle_max=settings.fetch_idle_max_interval,
        logger=logger,
        rng=rng,
        on_missing_ack=lambda ack: settler.note_duplicate(ack.jid),
        prefetch=settings.effective_prefetch,
        on_wrong_type=key_guard.request_check,
    )
    # Unique locks whose release failed: retried by a duty, handed over at shutdown.
    releases = DeferredReleases(redis, keys, logger)
    settler.releases = releases
    processors = Processors(
        fetcher,
        settler,
        registry,
        middleware,
        default_timeout=settings.job_timeout,
        concurrency=settings.concurrency,
        logger=logger,
        tracker=Tracker(redis, keys, settings, logger),
        history=settings.metrics_history,
        periodic=PeriodicRuns(redis, keys, logger),
        releases=releases,
    )
    # What the fetcher may forget the source queue of: none of these.
    fetcher.ours = known_jobs
    loop = asyncio.get_running_loop()

    def deliver_signal(name: str) -> None:
        loop.call_soon_threadsafe(on_signal, name)

    def deliver_wrong_type() -> None:
        # A closed loop: the worker is gone, nothing left to guard.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(key_guard.request_check)

    heartbeat = Heartbeat(
        settings,
        keys,
        identity=identity,
        queues=[s.name for s in settings.queue_specs],
        reliable=reliable,
        busy=processors.snapshot,
        logger=logger,
        on_signal=deliver_signal,
        on_wrong_type=deliver_wrong_type,
        jobs=registry.names,
    )
    return Parts(key_guard, settler, fetcher, processors, heartbeat, releases)
