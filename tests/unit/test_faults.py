"""Which errors are outages, and the once-per-outage log."""

from __future__ import annotations

import logging

import pytest
from redis import exceptions as rexc

from cogworker_async.store.faults import OutageLog, is_outage

OUTAGES: list[BaseException] = [
    rexc.ConnectionError("Connection refused"),
    rexc.TimeoutError("Timeout reading from socket"),
    rexc.BusyLoadingError("Redis is loading the dataset in memory"),
    rexc.ReadOnlyError("You can't write against a read only replica."),
    rexc.ClusterDownError("The cluster is down"),
    rexc.TryAgainError("Multiple keys request during rehashing of slot"),
    rexc.MasterDownError("Link with MASTER is down"),
    OSError("Network is unreachable"),
    ConnectionResetError("reset by peer"),
    TimeoutError("timed out"),
    rexc.ResponseError("LOADING Redis is loading the dataset in memory"),
    rexc.ResponseError("READONLY You can't write against a read only replica."),
    rexc.ResponseError("MASTERDOWN Link with MASTER is down"),
    rexc.ResponseError("TRYAGAIN Multiple keys request during rehashing of slot"),
    rexc.ResponseError("CLUSTERDOWN The cluster is down"),
]

NOT_OUTAGES: list[BaseException] = [
    rexc.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
    rexc.ResponseError("ERR unknown command 'BLMOVE'"),
    rexc.ResponseError("NOSCRIPT No matching script"),
    rexc.DataError("Invalid input"),
    ValueError("bad"),
    KeyError("k"),
    RuntimeError("boom"),
]


@pytest.mark.parametrize("exc", OUTAGES, ids=lambda e: f"{type(e).__name__}:{str(e)[:12]}")
def test_outage(exc: BaseException) -> None:
    assert is_outage(exc) is True


@pytest.mark.parametrize("exc", NOT_OUTAGES, ids=lambda e: f"{type(e).__name__}:{str(e)[:12]}")
def test_not_outage(exc: BaseException) -> None:
    assert is_outage(exc) is False


def test_outage_log_once_per_outage(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("cogworker_async.tests.faults")
    log = OutageLog("fetch", logger)
    caplog.set_level(logging.DEBUG, logger=logger.name)

    log.succeeded()  # nothing to report while Redis is fine
    assert not log.down
    assert caplog.records == []

    for _ in range(5):
        log.failed(rexc.ConnectionError("Connection refused"))
    assert log.down
    assert len(caplog.records) == 1
    start = caplog.records[0].getMessage()
    assert "fetch" in start
    assert "ConnectionError" in start
    assert "Connection refused" in start

    log.succeeded()
    log.succeeded()
    assert not log.down
    assert len(caplog.records) == 2
    end = caplog.records[1].getMessage()
    assert "fetch" in end
    assert "recovered after" in end

    # A new outage is a new pair of lines.
    log.failed(rexc.TimeoutError("slow"))
    log.failed(rexc.TimeoutError("slow"))
    log.succeeded()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4
    assert "TimeoutError" in messages[2]
    assert "recovered after" in messages[3]
    assert all(r.name == logger.name for r in caplog.records)


def test_outage_log_ignores_a_success_sent_before_the_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging
    import time

    from cogworker_async.store.faults import OutageLog

    outage = OutageLog("Fetch", logging.getLogger("t.outage"))
    sent_before = time.monotonic()
    outage.failed(ConnectionError("gone"))
    outage.succeeded(sent_before)  # an old call's late answer: still down
    assert outage.down
    outage.succeeded(time.monotonic())
    assert not outage.down
    assert caplog.text.count("Redis is back") == 1
