"""Start-up steps of a worker: the fetch mode, the boot key check, the first beat.

Each waits out an outage (logged once) instead of guessing while Redis is away,
calls ``on_outage`` when an attempt fails (so an embedded worker's ``async with``
goes on without Redis), and gives up as soon as ``stopping`` is set. The worker
also runs them in a scope that ``stop()`` cancels, for a call stuck on its
socket timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

import anyio
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.periodic_entry import Entry
from cogworker_async.settings import Settings
from cogworker_async.store.connection import keep_names_if_allowed, server_version
from cogworker_async.store.faults import OutageLog, is_outage
from cogworker_async.worker.heartbeat import Heartbeat
from cogworker_async.worker.keyguard import KeyGuard

MIN_RELIABLE_VERSION = (6, 2)


def _nothing() -> None:
    pass


async def name_blocking_waits(redis: Redis, blocking: Redis, logger: logging.Logger) -> None:
    """The blocking connections are named so a stop can end their wait on the server
    (``CLIENT UNBLOCK``); a user refused ``CLIENT SETNAME`` runs them unnamed, said once.
    An outage now is left for the fetch to meet (and report)."""
    try:
        named = await keep_names_if_allowed(blocking, redis)
    except Exception as exc:
        if is_outage(exc):
            return
        raise
    if not named:
        logger.info(
            "Redis refused CLIENT SETNAME: the blocking waits go unnamed, and a stop waits "
            "for them to time out (up to fetch_idle_max_interval)"
        )


async def resolve_reliable(
    redis: Redis,
    settings: Settings,
    stopping: anyio.Event,
    logger: logging.Logger,
    *,
    on_outage: Callable[[], None] = _nothing,
) -> bool:
    """Reliable fetch unless configured basic or the server lacks BLMOVE (< 6.2).

    Asked again after a connection error rather than memoising a guess made
    while Redis was away. ``INFO`` is optional: a server that refuses it (an
    ACL without ``+info``, a renamed command, a managed service) is taken to
    be current, said once, rather than keeping the worker from starting.
    """
    if settings.fetch == "basic":
        return False
    outage = OutageLog("Start-up", logger)
    while not stopping.is_set():
        try:
            version = await server_version(redis)
        except Exception as exc:
            if is_outage(exc):
                outage.failed(exc)
                on_outage()
                with anyio.move_on_after(1.0):
                    await stopping.wait()
                continue
            if not isinstance(exc, ResponseError):
                raise
            outage.succeeded()
            logger.warning(
                "Redis refused INFO (%s: %s): assuming a server of 6.2 or later (reliable "
                "fetch); set fetch=basic if it is older",
                type(exc).__name__,
                exc,
            )
            return True
        outage.succeeded()
        if version[:2] >= MIN_RELIABLE_VERSION:
            return True
        logger.warning(
            "Redis %s is older than 6.2 (no BLMOVE): using basic fetch (BRPOP, at most "
            "once: a job running when its process crashes is lost)",
            ".".join(map(str, version)),
        )
        return False
    return True


async def guard_keys_at_boot(guard: KeyGuard, settings: Settings, logger: logging.Logger) -> None:
    """One key-guard pass at start; never stops the start (the duty tries again)."""
    try:
        await guard.check_once()
    except Exception as exc:  # noqa: BLE001 - the duty retries every key_check_interval
        logger.warning(
            "key guard at start-up failed (%s: %s); tried again in %.0f s",
            type(exc).__name__,
            exc,
            settings.key_check_interval,
        )


async def first_beat(
    heartbeat: Heartbeat,
    stopping: anyio.Event,
    logger: logging.Logger,
    *,
    on_outage: Callable[[], None] = _nothing,
) -> bool:
    """Beat once before any processor fetches, waiting out an outage; False if stopped first."""
    outage = OutageLog("Heartbeat", logger)
    while not stopping.is_set():
        try:
            await anyio.to_thread.run_sync(heartbeat.beat_once)
        except Exception as exc:
            if not is_outage(exc):
                raise
            outage.failed(exc)
            on_outage()
            with anyio.move_on_after(1.0):
                await stopping.wait()
            continue
        outage.succeeded()
        return True
    return False


def log_started(
    log: logging.Logger, identity: str, settings: Settings, *, reliable: bool, job_types: int
) -> None:
    """The one line that says a worker runs, and how."""
    log.info(
        "worker %s started: %d processors, queues %s, %s fetch, %d job types",
        identity,
        settings.concurrency,
        ",".join(settings.queues),
        "reliable" if reliable else "basic",
        job_types,
    )


def warn_unread_queues(
    log: logging.Logger, settings: Settings, declared: Mapping[str, list[str]]
) -> list[str]:
    """One WARNING naming the queues some registered jobs are declared on that
    this worker does not read (``@job(queue="mail")`` under ``-q default``):
    such jobs wait until some other worker reads them. The unread queues, sorted."""
    read = {spec.name for spec in settings.queue_specs}
    unread = sorted(queue for queue in declared if queue not in read)
    if unread:
        log.warning(
            "this worker does not read queue(s) %s that its jobs are declared on (%s): "
            "those jobs wait for a worker that does (start it with -q %s too, or set "
            "Settings.queues / COGWORKER_QUEUES)",
            ", ".join(unread),
            "; ".join(f"{queue}: {', '.join(declared[queue])}" for queue in unread),
            " -q ".join(unread),
        )
    return unread


def periodic_entries(given: Iterable[Entry], declared: Iterable[Entry]) -> list[Entry]:
    """Every worker ticks these (a slot's claim decides who pushes): the entries
    given to the worker and those declared with ``@periodic`` on its jobs, the
    same entry given both ways counted once. Names must be unique."""
    entries: list[Entry] = []
    for entry in [*given, *declared]:
        if entry not in entries:
            entries.append(entry)
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"periodic entry names must be unique, got {names}")
    return entries
