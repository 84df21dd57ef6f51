"""Prometheus metrics and a health endpoint for a worker process (the ``metrics`` extra).

Nothing here can fail a job or stop a worker: the middleware only counts
around the run and re-raises whatever the job raised; a scrape that can't
reach Redis still answers, with ``cogworker_redis_up 0`` and the counters this
process keeps itself.

Two kinds of numbers:

* this process's own, counted as it runs jobs (the middleware): jobs
  processed (every finished run, as ``stats`` counts them) and failed, by job
  name and queue, and how long they took; and the Redis outages its duties
  reported (``watch``);
* the whole namespace's, read from Redis on each scrape with a short-timeout
  client (``RedisCollector``): queue sizes and latency, the retry, dead and
  schedule sets, live processes and busy processors, and the recovery
  counters. Every process reports the same values: aggregate them with
  ``max``, not ``sum``.

Wiring (the CLI's ``--metrics-port`` does exactly this)::

    metrics = Metrics(settings)
    worker = Worker(settings, jobs=[...], middleware=[metrics.middleware])
    metrics.watch(worker.log)
    server = metrics.serve(9100, identity=worker.identity)   # /metrics, /healthz
    ...
    server.close(); metrics.close()
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

from cogworker_async.keys import Keys
from cogworker_async.middleware import JobDict, Next
from cogworker_async.observability.redis_snapshot import SCRAPE_TIMEOUT, RedisCollector, sync_client
from cogworker_async.settings import Settings

# What store/faults.FailureLog logs when a duty loses Redis and when it is back
# (tests/integration/test_metrics.py drives the real log against these).
from cogworker_async.store.faults import OUTAGE_ENDED, OUTAGE_STARTED

DURATION_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    600.0, float("inf"),
)  # fmt: skip

ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - scraped from other hosts, like prometheus_client's server


class OutageWatcher(logging.Handler):
    """Counts Redis outages from the worker's own log, without a hook in the worker.

    Each duty logs once when it loses Redis and once when it has it back. An
    outage, for this process, starts when the first duty loses Redis and ends
    when the last one has it back, so one Redis restart counts once however
    many duties noticed it. (A logger set above WARNING hides both lines, and
    then nothing is counted.)
    """

    def __init__(self, outages: Counter, down: Gauge) -> None:
        super().__init__(level=logging.WARNING)
        self._outages = outages
        self._down_gauge = down
        self._down: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        # Handler.handle holds self.lock around emit: the heartbeat thread logs too.
        if not isinstance(record.args, tuple) or not record.args:
            return
        duty = str(record.args[0])
        if record.msg == OUTAGE_STARTED:
            if not self._down:
                self._outages.inc()
            self._down.add(duty)
        elif record.msg == OUTAGE_ENDED:
            self._down.discard(duty)
        else:
            return
        self._down_gauge.set(1 if self._down else 0)


class Metrics:
    """This process's job metrics, the namespace's Redis view, and the health check."""

    def __init__(
        self,
        settings: Settings,
        *,
        registry: CollectorRegistry | None = None,
        scrape_timeout: float = SCRAPE_TIMEOUT,
    ) -> None:
        self.settings = settings
        self.keys = Keys(settings.namespace)
        self.registry = registry if registry is not None else CollectorRegistry()
        labels = ("job", "queue")
        self.processed = Counter(
            "cogworker_jobs_processed",
            "Jobs this process finished running, successfully or not",
            labels,
            registry=self.registry,
        )
        self.failed = Counter(
            "cogworker_jobs_failed",
            "Jobs this process ran that failed (an exception or a timeout)",
            labels,
            registry=self.registry,
        )
        self.duration = Histogram(
            "cogworker_job_duration_seconds",
            "How long this process's jobs ran, middleware included",
            labels,
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.outages = Counter(
            "cogworker_redis_outages",
            "Redis outages this process's duties reported (first lost to last back)",
            registry=self.registry,
        )
        self.redis_down = Gauge(
            "cogworker_redis_down",
            "1 while a duty of this process reports Redis unavailable",
            registry=self.registry,
        )
        self._client = sync_client(settings, scrape_timeout)
        self.collector = RedisCollector(self._client, self.keys)
        self.registry.register(self.collector)
        self._watcher = OutageWatcher(self.outages, self.redis_down)
        self._watched: list[logging.Logger] = []

    async def middleware(self, job: JobDict, call_next: Next) -> None:
        """Server middleware: count and time each run; whatever the job raises goes on up.

        A run cancelled by shutdown is neither processed nor failed: it goes
        back on its queue and runs again.
        """
        labels = (str(job.get("class")), str(job.get("queue")))
        started = time.perf_counter()
        try:
            await call_next()
        except Exception:
            self.failed.labels(*labels).inc()
            self._finished(labels, started)
            raise
        self._finished(labels, started)

    def _finished(self, labels: tuple[str, str], started: float) -> None:
        self.processed.labels(*labels).inc()
        self.duration.labels(*labels).observe(time.perf_counter() - started)

    def watch(self, logger: logging.Logger) -> None:
        """Count the Redis outages reported on ``logger`` (pass ``worker.log``)."""
        logger.addHandler(self._watcher)
        self._watched.append(logger)

    def health(self, identity: str) -> dict[str, bool]:
        """``redis``: Redis answers PING; ``beating``: ``identity``'s presence key exists."""
        try:
            self._client.ping()
        except Exception:  # noqa: BLE001 - any failure to answer is "Redis is not there"
            return {"redis": False, "beating": False}
        try:
            beating = bool(self._client.exists(self.keys.process(identity)))
        except Exception:  # noqa: BLE001 - as above
            return {"redis": False, "beating": False}
        return {"redis": True, "beating": beating}

    def serve(self, port: int, *, identity: str, host: str = ALL_INTERFACES) -> MetricsServer:
        """Start serving ``/metrics`` and ``/healthz`` on a thread; ``port=0`` picks a free one."""
        server = MetricsServer(self, identity=identity, host=host, port=port)
        server.start()
        return server

    def close(self) -> None:
        """Stop watching the loggers given to ``watch`` and close the Redis connection."""
        for logger in self._watched:
            logger.removeHandler(self._watcher)
        self._watched.clear()
        self._client.close()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._reply(200, content_type, encoder(self.server.metrics.registry))
        elif path == "/healthz":
            status = self.server.metrics.health(self.server.identity)
            code = 200 if all(status.values()) else 503
            self._reply(code, "application/json", json.dumps(status).encode())
        else:
            self._reply(404, "text/plain; charset=utf-8", b"not found: try /metrics or /healthz\n")

    def _reply(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not worth a log line each."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], metrics: Metrics, identity: str) -> None:
        self.metrics = metrics
        self.identity = identity
        super().__init__(address, _Handler)


class MetricsServer:
    """``/metrics`` and ``/healthz`` over HTTP, on a daemon thread of its own.

    ``/healthz`` is 200 with ``{"redis": true, "beating": true}`` while Redis
    answers and this process's presence key exists, 503 (same shape) otherwise.
    """

    def __init__(self, metrics: Metrics, *, identity: str, host: str, port: int) -> None:
        self._server = _Server((host, port), metrics, identity)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="cogworker-metrics", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
