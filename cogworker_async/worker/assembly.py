"""A worker's parts, built together once the fetch mode is known.

The order matters: the key guard first (every part that may meet a WRONGTYPE
reply wakes it), the settler before the fetcher (a missing ack is noted as a
duplicate by it), and the heartbeat last (it reports what the processors run).
The heartbeat runs in its own thread: what it has to say (a remote signal, a
WRONGTYPE) is handed to the event loop. Then what the duties run (recovery,
reconciliation, the periodic ticker, the abort watcher): every part is built
here, once, into one frozen ``Parts`` whose types say what is present.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from cogworker_async.jobs import JobRegistry
from cogworker_async.keys import Keys
from cogworker_async.middleware import ServerMiddleware
from cogworker_async.periodic.entries import Entry
from cogworker_async.periodic.running import PeriodicRuns
from cogworker_async.periodic.ticker import Ticker
from cogworker_async.settings import Settings
from cogworker_async.unique.releases import DeferredReleases
from cogworker_async.worker.abort_listener import AbortWatcher
from cogworker_async.worker.fetcher import Fetcher
from cogworker_async.worker.freeze import FreezeGuard
from cogworker_async.worker.heartbeat import Heartbeat
from cogworker_async.worker.keyguard import KeyGuard
from cogworker_async.worker.processor import Processors
from cogworker_async.worker.reconcile import Reconciler
from cogworker_async.worker.recovery import Recovery
from cogworker_async.worker.settlement import Settler
from cogworker_async.worker.tracking import Tracker


@dataclass(frozen=True, slots=True)
class Parts:
    """A running worker's parts, built once the fetch mode is known (``build_parts``).

    What may be absent says so in its type: ``recovery`` is None in basic
    fetch mode (no in-progress lists to recover), ``ticker`` None without
    periodic entries. The connection, keys, settings, logger and random
    source are here too: what a duty needs is all in this one value.
    """

    redis: Redis
    keys: Keys
    settings: Settings
    logger: logging.Logger
    rng: random.Random
    key_guard: KeyGuard
    settler: Settler
    fetcher: Fetcher
    processors: Processors
    heartbeat: Heartbeat
    releases: DeferredReleases
    reconciler: Reconciler
    aborts: AbortWatcher
    recovery: Recovery | None
    ticker: Ticker | None


def build_parts(
    redis: Redis,
    blocking: Redis,
    settings: Settings,
    keys: Keys,
    *,
    identity: str,
    registry: JobRegistry,
    middleware: list[ServerMiddleware],
    logger: logging.Logger,
    rng: random.Random,
    reliable: Callable[[], bool],
    on_signal: Callable[[str], None],
    periodic: Sequence[Entry] = (),
) -> Parts:
    """Build the parts; on the event loop (the heartbeat's callbacks come back to it).

    ``on_signal``: a remote signal the heartbeat read, called on the loop.
    ``periodic``: the entries this worker ticks (their keys are guarded too).
    """
    periodic_names = [entry.name for entry in periodic]
    # First: every part that may meet a WRONGTYPE reply wakes it.
    key_guard = KeyGuard(
        redis,
        keys,
        settings,
        identity=identity,
        queues=[s.name for s in settings.queue_specs],
        periodic_names=periodic_names,
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
        give_back_held_after=settings.give_back_held_after,
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
        tracker=Tracker(redis, keys, settings, logger, on_wrong_key=key_guard.report),
        history=settings.metrics_history,
        periodic=PeriodicRuns(redis, keys, logger),
        releases=releases,
    )

    def known_jobs() -> list[bytes]:
        """Every in-progress job this process holds in memory (see Reconciler)."""
        known = list(processors.claimed.values())
        known.extend(fetcher.held)
        known.extend(fetcher.pending_ack_raws())
        known.extend(settler.pending)
        return known

    processors.freeze = freeze = FreezeGuard(
        redis,
        keys,
        identity=identity,
        ttl=settings.heartbeat_ttl,
        listed=reliable(),
        handout=fetcher.handout,
        claimed=processors.claimed.values,
        running_jids=processors.running_jids,
        logger=logger,
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
        on_beat=freeze.beaten,
    )
    processors.on_start = heartbeat.soon
    return Parts(
        redis=redis,
        keys=keys,
        settings=settings,
        logger=logger,
        rng=rng,
        key_guard=key_guard,
        settler=settler,
        fetcher=fetcher,
        processors=processors,
        heartbeat=heartbeat,
        releases=releases,
        reconciler=Reconciler(
            redis,
            keys,
            settler,
            identity=identity,
            default_queue=settings.queue_specs[0].name,
            known=known_jobs,
            fetching_since=fetcher.fetching_since,
            reliable=reliable,
            logger=logger,
        ),
        aborts=AbortWatcher(redis, keys, settings, processors, logger=logger, rng=rng),
        recovery=(
            Recovery(redis, keys, settings, identity=identity, logger=logger)
            if reliable()
            else None
        ),
        ticker=Ticker(redis, keys, periodic, logger) if periodic else None,
    )
