"""Batches and after=[...] as a scrape sees them: the namespace's batch counters
(``<ns>:stats:batches``, a hash of totals the batch scripts bump in the step
that counts each thing: ``batch_open.lua``, ``includes/batch_end.lua``) and
the jobs waiting on others. One HGETALL and one HLEN in the scrape's first
pipeline; bad data reads as 0.

* ``cogworker_batches_opened``: batches opened (child batches too);
* ``cogworker_batches_finished{state}``: batches over, by their end state
  (``success``: every member succeeded, ``dead``: one died, ``complete``:
  the rest) — every finished batch ran its ``on_complete``;
* ``cogworker_batch_members_ended{outcome}``: members counted as
  ``succeeded``, ``failed`` or ``dead`` (a child batch is one member);
* ``cogworker_batch_callbacks_enqueued{event}``: callbacks pushed
  (``success``, ``complete``, ``death``);
* ``cogworker_after_waiting``: jobs waiting on other jobs now (a gauge).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from cogworker_async.store.replies import count as _count

FINISHED_STATES = ("success", "dead", "complete")
MEMBER_OUTCOMES = ("succeeded", "failed", "dead")
CALLBACK_EVENTS = ("success", "complete", "death")


@dataclass(slots=True)
class BatchCounts:
    """The batch counters by field name (``opened``, ``finished_<state>``,
    ``members_<outcome>``, ``callbacks_<event>``) and the jobs waiting on others."""

    counters: dict[str, int] = field(default_factory=dict)
    after_waiting: int = 0


def parse_counts(stats: object, waiting: object) -> BatchCounts:
    fields = stats if isinstance(stats, dict) else {}
    counters = {
        (k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k)): _count(v)
        for k, v in fields.items()
    }
    return BatchCounts(counters, _count(waiting))


def batch_families(counts: BatchCounts | None) -> Iterator[Metric]:
    opened = CounterMetricFamily("cogworker_batches_opened", "Batches opened (child batches too)")
    finished = CounterMetricFamily(
        "cogworker_batches_finished", "Batches over, by end state", labels=["state"]
    )
    members = CounterMetricFamily(
        "cogworker_batch_members_ended", "Batch members' ends, by outcome", labels=["outcome"]
    )
    callbacks = CounterMetricFamily(
        "cogworker_batch_callbacks_enqueued", "Batch callbacks enqueued, by event", labels=["event"]
    )
    waiting = GaugeMetricFamily(
        "cogworker_after_waiting", "Jobs waiting on other jobs (after=[...])"
    )
    if counts is not None:
        got = counts.counters
        opened.add_metric([], got.get("opened", 0))
        for state in FINISHED_STATES:
            finished.add_metric([state], got.get(f"finished_{state}", 0))
        for outcome in MEMBER_OUTCOMES:
            members.add_metric([outcome], got.get(f"members_{outcome}", 0))
        for event in CALLBACK_EVENTS:
            callbacks.add_metric([event], got.get(f"callbacks_{event}", 0))
        waiting.add_metric([], counts.after_waiting)
    yield from (opened, finished, members, callbacks, waiting)
