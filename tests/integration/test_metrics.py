"""Prometheus metrics and /healthz: an in-process worker scraped over HTTP, real Redis."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import pytest
import redis as sync_redis
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis
from redis.exceptions import ConnectionError

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.keys import Keys
from cogworker_async.observability.prometheus import Metrics
from cogworker_async.observability.redis_snapshot import read_snapshot
from cogworker_async.store.faults import OutageLog
from tests.conftest import child_env
from tests.helpers import wait_for, wait_for_sync

ROOT = Path(__file__).resolve().parents[2]

ran: list[str] = []


@job(name="m.ok")
async def ok() -> None:
    ran.append("ok")


@job(name="m.boom", retry=False)
async def boom() -> None:
    ran.append("boom")
    raise ValueError("boom")


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return int(reply.status), bytes(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def scrape(port: int) -> Samples:
    status, body = get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    samples: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def health(port: int) -> tuple[int, dict[str, bool]]:
    status, body = get(f"http://127.0.0.1:{port}/healthz")
    return status, json.loads(body)


@pytest.fixture
def metrics(settings: Settings) -> Iterator[Metrics]:
    instance = Metrics(settings, registry=CollectorRegistry())
    yield instance
    instance.close()


@pytest.mark.anyio
async def test_scrape_after_a_run_and_healthz_until_the_worker_stops(
    settings: Settings, metrics: Metrics, redis: Redis, keys: Keys
) -> None:
    ran.clear()
    async with Client(settings) as client:
        for _ in range(3):
            await client.enqueue(ok)
        await client.enqueue(boom)
        await client.enqueue(ok.options(queue="elsewhere"))  # no worker reads it
        await client.enqueue(ok.options(delay=600))
    await redis.zadd(keys.dead, {b'{"not": "a job"}': time.time()})
    await redis.set(keys.stat("recovered"), 5)

    worker = Worker(settings, jobs=[ok, boom], middleware=[metrics.middleware])
    server = metrics.serve(0, identity=worker.identity, host="127.0.0.1")
    try:
        async with worker:

            async def all_ran() -> bool:
                return len(ran) == 4

            await wait_for(all_ran)
            # A handler has returned before its processor is free and its counters
            # are bumped: scraped until the last job's end shows, not at once.
            samples: Samples = {}

            async def settled() -> bool:
                nonlocal samples
                samples = await anyio.to_thread.run_sync(scrape, server.port)
                ok_key = (("job", "m.ok"), ("queue", "default"))
                boom_key = (("job", "m.boom"), ("queue", "default"))
                return (
                    samples.get(("cogworker_busy_processors", ())) == 0
                    and samples.get(("cogworker_jobs_processed_total", ok_key)) == 3
                    and samples.get(("cogworker_jobs_processed_total", boom_key)) == 1
                )

            await wait_for(settled)
            status, body = await anyio.to_thread.run_sync(health, server.port)
            assert (status, body) == (200, {"redis": True, "beating": True})
        status, body = await anyio.to_thread.run_sync(health, server.port)
        assert (status, body) == (503, {"redis": True, "beating": False})
        not_found, _ = await anyio.to_thread.run_sync(get, f"http://127.0.0.1:{server.port}/x")
        assert not_found == 404
    finally:
        server.close()

    def one(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert one("cogworker_jobs_processed_total", job="m.ok", queue="default") == 3
    assert one("cogworker_jobs_processed_total", job="m.boom", queue="default") == 1
    assert one("cogworker_jobs_failed_total", job="m.boom", queue="default") == 1
    assert ("cogworker_jobs_failed_total", (("job", "m.ok"), ("queue", "default"))) not in samples
    assert one("cogworker_job_duration_seconds_count", job="m.ok", queue="default") == 3
    assert one("cogworker_job_duration_seconds_bucket", job="m.ok", queue="default", le="+Inf") == 3
    assert one("cogworker_redis_up") == 1
    assert one("cogworker_queue_size", queue="elsewhere") == 1
    assert one("cogworker_queue_latency_seconds", queue="elsewhere") >= 0
    assert one("cogworker_queue_size", queue="default") == 0
    assert one("cogworker_queue_paused", queue="default") == 0
    assert one("cogworker_scheduled_size") == 1
    assert one("cogworker_retry_size") == 0
    assert one("cogworker_dead_size") == 1
    assert one("cogworker_processes") == 1
    assert one("cogworker_processors") == settings.concurrency
    assert one("cogworker_busy_processors") == 0
    assert one("cogworker_recovered_jobs_total") == 5
    assert one("cogworker_process_died_jobs_total") == 0
    assert one("cogworker_redis_outages_total") == 0


def test_scrape_and_healthz_without_redis(settings: Settings) -> None:
    gone = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    metrics = Metrics(gone, registry=CollectorRegistry(), scrape_timeout=0.5)
    server = metrics.serve(0, identity="nobody", host="127.0.0.1")
    try:
        samples = scrape(server.port)
        assert samples[("cogworker_redis_up", ())] == 0
        assert ("cogworker_queue_size", (("queue", "default"),)) not in samples
        assert health(server.port) == (503, {"redis": False, "beating": False})
    finally:
        server.close()
        metrics.close()


def test_bad_data_reads_as_empty_never_a_failed_scrape(
    sync_client: sync_redis.Redis, keys: Keys
) -> None:
    sync_client.set(keys.queues, "not a set")
    sync_client.rpush(keys.dead, "a list, not a sorted set")
    sync_client.set(keys.stat("process_died"), "corrupt")
    sync_client.rpush(keys.repeat_orphans, "a", "b")
    sync_client.sadd(keys.processes, "gone", "garbled", "odd")
    sync_client.set(keys.process("garbled"), "{not json")
    sync_client.set(keys.process("odd"), orjson.dumps({"busy": "x", "concurrency": True}))
    snapshot = read_snapshot(sync_client, keys)
    assert snapshot.queues == []
    assert snapshot.gauges["dead_size"] == 0
    assert snapshot.gauges["parked_size"] == 2
    assert snapshot.gauges["processes"] == 2  # two presence keys exist, neither readable
    assert snapshot.gauges["busy_processors"] == 0
    assert snapshot.counters["process_died"] == 0


def test_outages_counted_once_however_many_duties_report_them(metrics: Metrics) -> None:
    logger = logging.getLogger("tests.metrics.outages")
    logger.setLevel(logging.WARNING)
    metrics.watch(logger)
    fetch, beat = OutageLog("Fetch", logger), OutageLog("Heartbeat", logger)

    def value(name: str) -> float | None:
        return metrics.registry.get_sample_value(name)

    fetch.failed(ConnectionError("refused"))
    beat.failed(ConnectionError("refused"))
    assert (value("cogworker_redis_outages_total"), value("cogworker_redis_down")) == (1, 1)
    fetch.succeeded()
    assert value("cogworker_redis_down") == 1  # the heartbeat still can't reach it
    beat.succeeded()
    assert (value("cogworker_redis_outages_total"), value("cogworker_redis_down")) == (1, 0)
    beat.failed(ConnectionError("refused"))
    assert value("cogworker_redis_outages_total") == 2
    metrics.close()
    fetch.failed(ConnectionError("refused"))  # no longer watched
    assert value("cogworker_redis_outages_total") == 2


def test_a_cancelled_run_is_neither_processed_nor_failed(metrics: Metrics) -> None:
    async def cancelled() -> None:
        raise asyncio.CancelledError

    async def main() -> None:
        with pytest.raises(asyncio.CancelledError):
            await metrics.middleware({"class": "m.ok", "queue": "q"}, cancelled)

    asyncio.run(main())
    assert metrics.registry.get_sample_value(
        "cogworker_jobs_processed_total", {"job": "m.ok", "queue": "q"}
    ) in (None, 0)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_worker_command_serves_metrics_port(settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "worker.log"
    command = [sys.executable, "-m", "cogworker_async", "worker", "tests.jobs_for_tests"]
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [*command, "--metrics-port", str(port), "--metrics-host", "127.0.0.1"],
            cwd=ROOT,
            env=child_env(settings),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:

            def healthy() -> bool:
                try:
                    return health(port)[0] == 200
                except OSError:
                    return False

            wait_for_sync(healthy, timeout=20)
            samples = scrape(port)
            assert samples[("cogworker_processes", ())] == 1
            assert ("process_cpu_seconds_total", ()) in samples  # the global registry's
        finally:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(timeout=20)
    assert code == 0, log_path.read_text()
    assert "metrics on http://127.0.0.1:" in log_path.read_text()


def cli(settings: Settings, *args: str, code: str = "") -> subprocess.CompletedProcess[str]:
    prelude = code + "import sys; from cogworker_async.cli import main; sys.argv[0] = 'x'; main()"
    return subprocess.run(
        [sys.executable, "-c", prelude, *args],
        cwd=ROOT,
        env=child_env(settings),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_metrics_port_mistakes_are_one_line_errors(settings: Settings) -> None:
    swarm = cli(
        settings, "worker", "tests.jobs_for_tests", "--metrics-port", "1", "--processes", "2"
    )
    assert swarm.returncode == 2
    assert "--metrics-port serves one process" in swarm.stderr
    assert "Traceback" not in swarm.stderr

    missing = cli(
        settings,
        "worker",
        "tests.jobs_for_tests",
        "--metrics-port",
        "1",
        code="import sys; sys.modules['prometheus_client'] = None; ",
    )
    assert missing.returncode == 2
    assert "--metrics-port needs the metrics extra" in missing.stderr
    assert "pip install 'cogworker-async[metrics]'" in missing.stderr
    assert "Traceback" not in missing.stderr

    no_otel = cli(
        settings,
        "worker",
        "tests.jobs_for_tests",
        "--otel",
        code="import sys; sys.modules['opentelemetry'] = None; ",
    )
    assert no_otel.returncode == 2
    assert "--otel needs the otel extra" in no_otel.stderr
    assert "Traceback" not in no_otel.stderr


def test_the_limits_in_use_per_key_and_in_all(
    sync_client: sync_redis.Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from cogworker_async.observability import limit_gauges
    from cogworker_async.observability.redis_snapshot import RedisCollector

    # The session's server holds every test's keys: the SCAN may take more calls.
    monkeypatch.setattr(limit_gauges, "SCAN_CALLS", 100_000)
    sync_client.sadd(keys.limit_slots("stripe"), "j1", "j2")
    sync_client.lpush(keys.limit_parked("stripe"), "a", "b", "c")
    sync_client.lpush(keys.limit_parked("acct:7"), "d")
    sync_client.set(keys.limit_slots("broken"), "not a set")  # reads as 0
    seed_admitted(sync_client, keys, {"stripe": 25, "acct:7": 5})
    snapshot = read_snapshot(sync_client, keys)
    assert snapshot.limits.keys == {"stripe": (2, 3), "acct:7": (0, 1), "broken": (0, 0)}
    assert snapshot.limits.admitted == {"stripe": 2.5, "acct:7": 0.5}
    assert snapshot.limits.complete
    registry = CollectorRegistry()
    registry.register(RedisCollector(sync_client, keys))
    text = generate_latest(registry).decode()
    assert 'cogworker_limit_running{key="stripe"} 2.0' in text
    assert 'cogworker_limit_held{key="stripe"} 3.0' in text
    assert "cogworker_limits_held 4.0" in text
    assert "cogworker_limits_complete 1.0" in text
    assert 'cogworker_limit_admitted_per_second{key="stripe"} 2.5' in text
    assert "cogworker_limits_admitted_per_second 3.0" in text


def seed_admitted(client: sync_redis.Redis, keys: Keys, counts: dict[str, int]) -> None:
    """Admissions counted in the last full 10 s bucket, as includes/limits.lua does;
    the current bucket too, so a read that crosses a boundary finds the same."""
    from cogworker_async.store.limits import last_full_bucket

    last = last_full_bucket(client.time())  # type: ignore[arg-type]
    for bucket in (last, last + 1):
        client.hset(keys.limit_admitted(bucket), mapping=counts)  # type: ignore[arg-type]
        client.expire(keys.limit_admitted(bucket), 30)


def test_a_scan_cut_short_says_so(
    sync_client: sync_redis.Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cogworker_async.observability import limit_gauges

    monkeypatch.setattr(limit_gauges, "SCAN_CALLS", 1)
    monkeypatch.setattr(limit_gauges, "SCAN_COUNT", 1)
    for i in range(20):
        sync_client.sadd(keys.limit_slots(f"k{i}"), "j")
    assert not limit_gauges.read_limits(sync_client, keys).complete
