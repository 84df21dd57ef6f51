"""OpenTelemetry tracing from enqueue to run (the ``otel`` extra).

The client middleware opens a span ``cogworker.enqueue <name>`` and writes the
trace context into the job under ``"trace"`` (an object of text headers,
``traceparent`` and ``tracestate`` with the default W3C propagator); the
server middleware reads it back and runs the job inside a span
``cogworker.run <name>`` whose parent is that enqueue span. A job without the
field, or with one that can't be read, runs in a new trace: tracing never
fails a job. Spans go wherever the tracer provider sends them: with the API
alone (no SDK configured) they cost next to nothing and go nowhere.

Wiring::

    tracing = Tracing()            # the global tracer provider and propagator
    client = Client(settings, middleware=[tracing.client_middleware])
    worker = Worker(settings, jobs=[...], middleware=[tracing.server_middleware])
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.propagate import get_global_textmap
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from cogworker_async.context import tries_before
from cogworker_async.middleware import JobDict, Next

TRACE_FIELD = "trace"
"""The job field that carries the trace context (any other producer may write it too)."""


def _attributes(job: JobDict, operation: str) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "messaging.system": "cogworker",
        "messaging.operation": operation,
    }
    for attribute, name in (
        ("messaging.destination.name", "queue"),
        ("messaging.message.id", "jid"),
        ("cogworker.job", "class"),
    ):
        value = job.get(name)
        if isinstance(value, str):
            attributes[attribute] = value
    # Which try this is, as current_job().retry_count says it: 0 on the first
    # run, 1 on the first retry (the payload's own field is Sidekiq's index of
    # the last failure, absent before the first one).
    attributes["cogworker.retry_count"] = tries_before(job.get("retry_count"))
    return attributes


def _carrier(value: Any) -> dict[str, str]:
    """The trace headers a job carries; anything that isn't text is ignored."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


class Tracing:
    """Both middlewares, sharing one tracer and one propagator.

    ``tracer_provider`` and ``propagator`` default to the global ones (the
    propagator is looked up on each job, so one set later still counts).
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        propagator: TextMapPropagator | None = None,
    ) -> None:
        self._tracer = trace.get_tracer("cogworker_async", tracer_provider=tracer_provider)
        self._propagator = propagator

    def _textmap(self) -> TextMapPropagator:
        return self._propagator if self._propagator is not None else get_global_textmap()

    async def client_middleware(self, job: JobDict) -> JobDict:
        """Client middleware: a span for the enqueue, its context written into the job."""
        with self._tracer.start_as_current_span(
            f"cogworker.enqueue {job.get('class')}",
            kind=SpanKind.PRODUCER,
            attributes=_attributes(job, "publish"),
        ):
            carrier: dict[str, str] = {}
            self._textmap().inject(carrier)
        if carrier:
            job[TRACE_FIELD] = carrier
        return job

    async def server_middleware(self, job: JobDict, call_next: Next) -> None:
        """Server middleware: run the job in a span, a child of its enqueue span.

        A job's exception is recorded on the span and raised on; a cancellation
        (shutdown) is not an error: the job goes back on its queue.
        """
        parent = self._textmap().extract(_carrier(job.get(TRACE_FIELD)))
        with self._tracer.start_as_current_span(
            f"cogworker.run {job.get('class')}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=_attributes(job, "process"),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                await call_next()
            except Exception as exc:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                raise


def has_tracer_provider() -> bool:
    """False while no tracer provider is set globally (spans would go nowhere)."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
