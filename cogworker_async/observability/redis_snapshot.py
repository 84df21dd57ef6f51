"""The namespace as a Prometheus scrape sees it, read from Redis with a blocking client.

Read on each scrape (``RedisCollector``) in two pipelined round trips, with a
client that gives up after a short timeout: queue sizes, latency and paused
flags, the retry, dead and schedule sets, parked repeat orphans, live
processes and their busy processors, and the recovery counters; then the
limits in use (a bounded SCAN: ``observability/limit_gauges.py``). Bad data
never fails a scrape: a key of the wrong type reads as empty, a corrupt
counter or presence record as 0. An outage gives ``cogworker_redis_up 0``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cogworker_async.keys import Keys
from cogworker_async.observability.batch_counters import (
    BatchCounts,
    batch_families,
    parse_counts,
)
from cogworker_async.observability.history import MinuteCounts, minute_of, parse_minute
from cogworker_async.observability.limit_gauges import LimitCounts, limit_families, read_limits
from cogworker_async.settings import Settings
from cogworker_async.store.connection import connect_sync
from cogworker_async.store.faults import is_outage
from cogworker_async.store.replies import count as _count

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT = 2.0
"""Seconds a scrape or a health check waits for Redis before saying it is down."""

RECOVERY_COUNTERS = {
    "recovered": "Jobs requeued from dead processes by orphan recovery",
    "process_died": "Jobs buried in dead as ProcessDied after too many orphanings",
    "duplicates_suspected": "Acks that found their job already requeued (it may have run twice)",
}


def sync_client(settings: Settings, timeout: float = SCRAPE_TIMEOUT) -> redis.Redis:
    """A blocking client that gives up quickly and never retries on its own."""
    return connect_sync(settings, socket_timeout=timeout, socket_connect_timeout=timeout)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _members(value: object) -> list[str]:
    return sorted(_text(m) for m in value) if isinstance(value, set | list) else []


def _latency(oldest: object, now: float) -> float:
    """Seconds the job popped next has waited (0 when there is none or it can't be read)."""
    if not isinstance(oldest, bytes | str):
        return 0.0
    try:
        job = orjson.loads(oldest)
        enqueued = float(job.get("enqueued_at") or job.get("created_at"))
    except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
        return 0.0
    return max(0.0, now - enqueued)


def _presence(value: object) -> dict[str, Any] | None:
    if not isinstance(value, bytes | str):
        return None
    try:
        info = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return info if isinstance(info, dict) else None


GAUGES = {
    "scheduled_size": "Jobs in the schedule set",
    "retry_size": "Jobs in the retry set",
    "dead_size": "Jobs in the dead set",
    "parked_size": "Repeat orphans parked on their way to dead",
    "processes": "Live worker processes (presence key present)",
    "processors": "Processors (concurrency) of the live processes",
    "busy_processors": "Processors of the live processes running a job",
}


@dataclass(slots=True)
class Snapshot:
    """The namespace as one scrape read it: ``(name, size, latency, paused)`` per queue,
    the ``GAUGES`` and the ``RECOVERY_COUNTERS`` by name."""

    queues: list[tuple[str, int, float, bool]] = field(default_factory=list)
    gauges: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GAUGES, 0))
    counters: dict[str, int] = field(default_factory=dict)
    # The metrics history's last complete minute (empty with history off).
    last_minute: MinuteCounts = field(default_factory=lambda: MinuteCounts(0, 0, {}))
    # The limits in use (observability/limit_gauges.py).
    limits: LimitCounts = field(default_factory=LimitCounts)
    # Batch counters and jobs waiting on others (observability/batch_counters.py).
    batches: BatchCounts = field(default_factory=BatchCounts)


def read_snapshot(client: redis.Redis, keys: Keys) -> Snapshot:
    """Read the namespace in two pipelined round trips.

    A key of the wrong type reads as empty (the worker's key guard moves it to
    quarantine); an outage raises.
    """
    with client.pipeline(transaction=False) as pipe:
        pipe.smembers(keys.queues)
        pipe.smembers(keys.paused)
        pipe.smembers(keys.processes)
        pipe.zcard(keys.schedule)
        pipe.zcard(keys.retry)
        pipe.zcard(keys.dead)
        pipe.llen(keys.repeat_orphans)
        for name in RECOVERY_COUNTERS:
            pipe.get(keys.stat(name))
        pipe.hgetall(keys.history(minute_of(time.time()) - 1))
        pipe.hgetall(keys.batch_stats)
        pipe.hlen(keys.after_waiting)
        first = pipe.execute(raise_on_error=False)
    _raise_outage(first)
    names, paused, identities = (_members(reply) for reply in first[:3])
    *counters, last_minute, batch_stats, after_waiting = first[7:]
    snapshot = Snapshot(
        counters=dict(zip(RECOVERY_COUNTERS, map(_count, counters), strict=True)),
        last_minute=parse_minute(last_minute if isinstance(last_minute, dict) else {}),
        batches=parse_counts(batch_stats, after_waiting),
    )
    sizes = ("scheduled_size", "retry_size", "dead_size", "parked_size")
    for name, reply in zip(sizes, first[3:7], strict=True):
        snapshot.gauges[name] = _count(reply)
    snapshot.limits = read_limits(client, keys)
    if not names and not identities:
        return snapshot
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.llen(keys.queue(name))
            pipe.lindex(keys.queue(name), -1)
        for identity in identities:
            pipe.get(keys.process(identity))
        second = pipe.execute(raise_on_error=False)
    _raise_outage(second)
    now = time.time()
    for index, name in enumerate(names):
        size, oldest = second[2 * index], second[2 * index + 1]
        snapshot.queues.append((name, _count(size), _latency(oldest, now), name in paused))
    for reply in second[2 * len(names) :]:
        if reply is None or isinstance(reply, Exception):
            continue  # gone (presence key expired) or not a string: not a live process
        info = _presence(reply) or {}
        snapshot.gauges["processes"] += 1
        snapshot.gauges["busy_processors"] += _count(info.get("busy"))
        snapshot.gauges["processors"] += _count(info.get("concurrency"))
    return snapshot


def _raise_outage(replies: Iterable[object]) -> None:
    for reply in replies:
        if isinstance(reply, Exception) and is_outage(reply):
            raise reply


QUEUE_GAUGES = {
    "queue_size": "Jobs waiting on the queue",
    "queue_latency_seconds": "How long the job fetched next from the queue has waited",
    "queue_paused": "1 when the queue is paused",
}


class RedisCollector(Collector):
    """The namespace's queues, sets, processes and recovery counters, read on each scrape."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self._keys = keys

    def describe(self) -> Iterable[Metric]:
        # Without this, registering with an auto-describing registry would read Redis.
        return list(self._families(None))

    def collect(self) -> Iterable[Metric]:
        try:
            snapshot: Snapshot | None = read_snapshot(self._client, self._keys)
        except Exception as exc:  # noqa: BLE001 - a scrape answers even when Redis can't
            if not is_outage(exc):
                log.warning("metrics: reading Redis failed: %s: %s", type(exc).__name__, exc)
            snapshot = None
        return list(self._families(snapshot))

    def _families(self, snapshot: Snapshot | None) -> Iterator[Metric]:
        up = "1 when this scrape could read Redis, else 0"
        yield GaugeMetricFamily("cogworker_redis_up", up, value=int(snapshot is not None))
        per_queue = [
            GaugeMetricFamily(f"cogworker_{name}", text, labels=["queue"])
            for name, text in QUEUE_GAUGES.items()
        ]
        for name, size, latency, paused in snapshot.queues if snapshot else ():
            for family, value in zip(per_queue, (size, latency, int(paused)), strict=True):
                family.add_metric([name], value)
        yield from per_queue
        for name, text in GAUGES.items():
            family = GaugeMetricFamily(f"cogworker_{name}", text)
            if snapshot is not None:
                family.add_metric([], snapshot.gauges[name])
            yield family
        for name, text in RECOVERY_COUNTERS.items():
            counter = CounterMetricFamily(f"cogworker_{name}_jobs", text)
            if snapshot is not None:
                counter.add_metric([], snapshot.counters[name])
            yield counter
        yield from _last_minute(snapshot.last_minute if snapshot else None)
        yield from limit_families(snapshot.limits if snapshot else None)
        yield from batch_families(snapshot.batches if snapshot else None)


LAST_MINUTE = {
    "runs": "Runs of the job in the last complete minute, every process (metrics history)",
    "failures": "Failed runs of the job in the last complete minute (metrics history)",
    "run_seconds": "Total run time of its successful runs in the last complete minute",
}


def _last_minute(counts: MinuteCounts | None) -> Iterator[Metric]:
    """The metrics history's last complete minute: totals, and per job name."""
    for name, text in (("processed", "Jobs settled"), ("failed", "Jobs failed")):
        family = GaugeMetricFamily(
            f"cogworker_last_minute_{name}", f"{text} in the last complete minute, every process"
        )
        if counts is not None:
            family.add_metric([], getattr(counts, name))
        yield family
    families = {
        name: GaugeMetricFamily(f"cogworker_job_last_minute_{name}", text, labels=["job"])
        for name, text in LAST_MINUTE.items()
    }
    for job, c in counts.jobs.items() if counts else ():
        families["runs"].add_metric([job], c.runs)
        families["failures"].add_metric([job], c.failures)
        families["run_seconds"].add_metric([job], c.run_us / 1e6)
    yield from families.values()
