"""A worker whose jobs are declared on a queue it does not read says so once at start.

``@job(queue="mail")`` under a worker that reads only ``default`` is the
tutorial's first trap: the job is accepted, enqueued on ``mail`` and waits there
for ever. The worker knows at start which queues its jobs go to and which it
reads, so it names the difference in one WARNING.
"""

from __future__ import annotations

import logging

import pytest

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.jobs import JobRegistry
from cogworker_async.worker import startup

pytestmark = pytest.mark.anyio

WARNING_START = "this worker does not read queue(s)"


@job(name="test.unread.welcome", queue="mail", keep_result=60)
async def welcome(email: str) -> str:
    return email


@job(name="test.unread.digest", queue="mail")
async def digest() -> None:
    return None


@job(name="test.unread.resize", queue="images")
async def resize() -> None:
    return None


@job(name="test.unread.plain", keep_result=60)
async def plain() -> str:
    return "ran"


ALL = [welcome, digest, resize, plain]


def _unread_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith(WARNING_START)]


def test_the_registry_groups_its_jobs_by_their_declared_queue() -> None:
    assert JobRegistry(ALL).default_queues == {
        "default": ["test.unread.plain"],
        "images": ["test.unread.resize"],
        "mail": ["test.unread.digest", "test.unread.welcome"],
    }
    assert JobRegistry().default_queues == {}


async def test_a_worker_names_the_queues_it_does_not_read_and_their_jobs(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cogworker_async")
    async with Client(settings) as client, Worker(settings, jobs=ALL):
        # Started for real: it still runs what it does read.
        assert await (await client.enqueue(plain)).result(timeout=30) == "ran"
    (record,) = _unread_warnings(caplog)
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "queue(s) images, mail " in message
    assert "(images: test.unread.resize; mail: test.unread.digest, test.unread.welcome)" in message
    assert "-q images -q mail" in message
    assert "default" not in message.split("(")[0]


async def test_a_worker_that_reads_every_declared_queue_says_nothing(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cogworker_async")
    reading_all = settings.model_copy(update={"queues": ("default", "mail:2", "images")})
    async with Client(reading_all) as client, Worker(reading_all, jobs=ALL):
        handle = await client.enqueue(welcome, "ada@example.com")
        assert await handle.result(timeout=30) == "ada@example.com"
    assert _unread_warnings(caplog) == []
    assert any("started" in r.getMessage() for r in caplog.records)


def test_the_warning_is_one_line_with_the_sorted_queues() -> None:
    log = logging.getLogger("test.unread")
    settings = Settings(queues=("default",))
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    log.addHandler(handler)
    try:
        unread = startup.warn_unread_queues(
            log, settings, {"zeta": ["z.job"], "default": ["d.job"], "alpha": ["a.job"]}
        )
        assert startup.warn_unread_queues(log, settings, {"default": ["d.job"]}) == []
    finally:
        log.removeHandler(handler)
    assert unread == ["alpha", "zeta"]
    (record,) = records
    assert "\n" not in record.getMessage()
    assert record.getMessage().startswith(f"{WARNING_START} alpha, zeta ")
