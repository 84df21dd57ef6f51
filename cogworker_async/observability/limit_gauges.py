"""The limits as a scrape sees them: per key, the jobs running with a slot, the
jobs held on it and the jobs admitted a second over the last full 10 s
(``cogworker_limit_running`` / ``cogworker_limit_held`` /
``cogworker_limit_admitted_per_second``, label ``key``), and their totals.

The keys are found by a bounded SCAN of ``<ns>:limits:*`` (at most
``SCAN_CALLS`` calls; ``cogworker_limits_complete`` says 0 when it stopped
early) and read in one pipeline; at most ``KEYS_SHOWN`` keys get series of
their own (the most held first), so a limit per account does not make a
series per account. Bad data reads as 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import redis
from prometheus_client.core import GaugeMetricFamily, Metric

from cogworker_async.keys import Keys
from cogworker_async.store.limits import admitted_per_second, last_full_bucket
from cogworker_async.store.replies import count as _count

SCAN_CALLS = 20
SCAN_COUNT = 1000
KEYS_SHOWN = 100


@dataclass(slots=True)
class LimitCounts:
    """``(running, held)`` by key; ``complete``: the SCAN saw every key;
    ``admitted``: jobs admitted a second by key (the last full 10 s)."""

    keys: dict[str, tuple[int, int]] = field(default_factory=dict)
    complete: bool = True
    admitted: dict[str, float] = field(default_factory=dict)


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def _name_of(prefix: str, key: str) -> str | None:
    rest = key[len(prefix) :]
    if rest.startswith("~parked:"):
        return rest[len("~parked:") :] or None
    return None if rest.startswith("~") or not rest else rest


def read_limits(client: redis.Redis, keys: Keys) -> LimitCounts:
    prefix = keys.limits_prefix
    names: set[str] = set()
    cursor, calls, complete = 0, 0, True
    while True:
        cursor, found = client.scan(cursor, match=_glob_escape(prefix) + "*", count=SCAN_COUNT)
        calls += 1
        for key in found:
            text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
            name = _name_of(prefix, text)
            if name is not None:
                names.add(name)
        if cursor == 0:
            break
        if calls >= SCAN_CALLS:
            complete = False
            break
    bucket = last_full_bucket(client.time())
    admitted = admitted_per_second(client.hgetall(keys.limit_admitted(bucket)))
    names |= set(admitted)
    ordered = sorted(names)
    with client.pipeline(transaction=False) as pipe:
        for name in ordered:
            pipe.scard(keys.limit_slots(name))
            pipe.llen(keys.limit_parked(name))
        replies = pipe.execute(raise_on_error=False)
    counts = {
        name: (_count(replies[2 * i]), _count(replies[2 * i + 1])) for i, name in enumerate(ordered)
    }
    return LimitCounts(counts, complete, admitted)


def limit_families(counts: LimitCounts | None) -> Iterator[Metric]:
    running = GaugeMetricFamily(
        "cogworker_limit_running", "Jobs running with a concurrency slot of the key", labels=["key"]
    )
    held = GaugeMetricFamily(
        "cogworker_limit_held", "Jobs held by the key's limit, waiting for room", labels=["key"]
    )
    admitted = GaugeMetricFamily(
        "cogworker_limit_admitted_per_second",
        "Jobs the key's limit admitted a second, over the last full 10 s",
        labels=["key"],
    )
    totals = {
        "running": GaugeMetricFamily(
            "cogworker_limits_running", "Jobs running with a concurrency slot, every key"
        ),
        "held": GaugeMetricFamily("cogworker_limits_held", "Jobs held by a limit, every key"),
        "admitted": GaugeMetricFamily(
            "cogworker_limits_admitted_per_second", "Admissions a second, every key"
        ),
        "complete": GaugeMetricFamily(
            "cogworker_limits_complete", "1 when the scrape saw every limit key"
        ),
    }
    if counts is not None:
        shown = sorted(counts.keys.items(), key=lambda item: (-item[1][1], -item[1][0], item[0]))
        for key, (in_use, waiting) in shown[:KEYS_SHOWN]:
            running.add_metric([key], in_use)
            held.add_metric([key], waiting)
        for key, rate in sorted(counts.admitted.items(), key=lambda item: -item[1])[:KEYS_SHOWN]:
            admitted.add_metric([key], rate)
        totals["admitted"].add_metric([], sum(counts.admitted.values()))
        totals["running"].add_metric([], sum(r for r, _ in counts.keys.values()))
        totals["held"].add_metric([], sum(h for _, h in counts.keys.values()))
        totals["complete"].add_metric([], int(counts.complete))
    yield running
    yield held
    yield admitted
    yield from totals.values()
