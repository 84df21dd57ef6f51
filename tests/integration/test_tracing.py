"""OpenTelemetry: the trace context rides in the job from enqueue to run (in-memory exporter)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import orjson
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from redis.asyncio import Redis

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.keys import Keys
from cogworker_async.observability.tracing import TRACE_FIELD, Tracing
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

seen: list[tuple[str, trace.SpanContext]] = []


@job(name="tr.work")
async def work(x: int) -> None:
    seen.append(("work", trace.get_current_span().get_span_context()))


@job(name="tr.fail", retry=False)
async def fail() -> None:
    seen.append(("fail", trace.get_current_span().get_span_context()))
    raise RuntimeError("nope")


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    seen.clear()
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.clear()


@pytest.fixture
def tracing(exporter: InMemorySpanExporter) -> Tracing:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(tracer_provider=provider)


def by_name(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    spans = [s for s in exporter.get_finished_spans() if s.name == name]
    assert len(spans) == 1, [s.name for s in exporter.get_finished_spans()]
    return spans[0]


async def run_until(settings: Settings, tracing: Tracing, count: int) -> None:
    async def done() -> bool:
        return len(seen) == count

    async with Worker(settings, jobs=[work, fail], middleware=[tracing.server_middleware]):
        await wait_for(done)


async def test_trace_context_carried_from_enqueue_to_run(
    settings: Settings, tracing: Tracing, exporter: InMemorySpanExporter, redis: Redis, keys: Keys
) -> None:
    async with Client(settings, middleware=[tracing.client_middleware]) as client:
        jid = await client.enqueue(work, 1)
    queued = orjson.loads(await redis.lindex(keys.queue("default"), 0))
    assert set(queued[TRACE_FIELD]) >= {"traceparent"}

    enqueue = by_name(exporter, "cogworker.enqueue tr.work")
    assert enqueue.kind is SpanKind.PRODUCER
    assert enqueue.context is not None
    assert queued[TRACE_FIELD]["traceparent"].split("-")[1:3] == [
        format(enqueue.context.trace_id, "032x"),
        format(enqueue.context.span_id, "016x"),
    ]

    await run_until(settings, tracing, 1)
    run = by_name(exporter, "cogworker.run tr.work")
    assert run.kind is SpanKind.CONSUMER
    assert run.parent is not None
    assert run.parent.span_id == enqueue.context.span_id
    assert run.context is not None
    assert run.context.trace_id == enqueue.context.trace_id
    assert run.attributes is not None
    assert run.attributes["messaging.message.id"] == jid
    assert run.attributes["messaging.destination.name"] == "default"
    assert run.status.status_code is StatusCode.UNSET
    # The handler ran inside the run span: its own spans would be children of it.
    assert seen == [("work", run.context)]


async def test_a_failure_is_recorded_on_the_run_span(
    settings: Settings, tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    async with Client(settings, middleware=[tracing.client_middleware]) as client:
        await client.enqueue(fail)
    await run_until(settings, tracing, 1)
    run = by_name(exporter, "cogworker.run tr.fail")
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description == "RuntimeError: nope"
    assert [event.name for event in run.events] == ["exception"]


async def test_jobs_without_a_readable_trace_run_in_a_new_trace(
    settings: Settings, tracing: Tracing, exporter: InMemorySpanExporter, redis: Redis, keys: Keys
) -> None:
    for jid, carried in (("a" * 24, None), ("b" * 24, "garbage"), ("c" * 24, {"traceparent": 5})):
        await _push_work(redis, keys, jid, {} if carried is None else {TRACE_FIELD: carried})
    await run_until(settings, tracing, 3)
    runs = [s for s in exporter.get_finished_spans() if s.name == "cogworker.run tr.work"]
    assert len(runs) == 3
    assert all(span.parent is None for span in runs)
    assert len({span.context.trace_id for span in runs if span.context}) == 3


async def test_the_run_span_says_which_try_as_current_job_does(
    settings: Settings, tracing: Tracing, exporter: InMemorySpanExporter, redis: Redis, keys: Keys
) -> None:
    """The first run is try 0, the first retry (payload retry_count 0, Sidekiq's index) try 1."""
    for jid, last_failure in (("d" * 24, None), ("e" * 24, 0), ("f" * 24, 4)):
        await _push_work(
            redis, keys, jid, {} if last_failure is None else {"retry_count": last_failure}
        )
    await run_until(settings, tracing, 3)
    tries = {
        span.attributes["messaging.message.id"]: span.attributes["cogworker.retry_count"]
        for span in exporter.get_finished_spans()
        if span.name == "cogworker.run tr.work" and span.attributes is not None
    }
    assert tries == {"d" * 24: 0, "e" * 24: 1, "f" * 24: 5}


async def _push_work(redis: Redis, keys: Keys, jid: str, extra: dict[str, object]) -> None:
    """A ``tr.work`` payload as another producer would push it, with ``extra`` fields."""
    job_dict: dict[str, object] = {
        "jid": jid,
        "class": "tr.work",
        "args": [1],
        "queue": "default",
        "created_at": time.time(),
        "enqueued_at": time.time(),
        **extra,
    }
    await redis.lpush(keys.queue("default"), orjson.dumps(job_dict))
    await redis.sadd(keys.queues, "default")
