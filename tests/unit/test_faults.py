"""Which errors are outages, and the once-per-outage log."""

from __future__ import annotations

import logging

import pytest
from redis import exceptions as rexc

from cogworker_async.store.faults import OutageLog, is_outage, is_wrong_type, reply_text

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
    # Redis 6 wraps a command's error inside a script.
    rexc.ResponseError(
        "Error running script (call to f_07b6882a659f9c986d7afa1305aec6bd787e1c3c): "
        "@user_script:12: READONLY You can't write against a read only replica."
    ),
    # Redis 6.2.14: a write refused by the script runner itself, wrapped twice.
    rexc.ResponseError(
        "Error running script (call to f_0c1562dab609b1762fd928e12ce359542d70a2b4): "
        "@user_script:33: @user_script: 33: -READONLY You can't write against a read only replica."
    ),
]


def test_wrong_type_is_recognised_inside_a_pipeline_or_script_wrapper() -> None:
    reply = "WRONGTYPE Operation against a key holding the wrong kind of value"
    assert is_wrong_type(rexc.ResponseError(reply))
    assert is_wrong_type(
        rexc.ResponseError(
            f"Command # 2 (HGETALL t:stats (odd) key) of pipeline caused error: {reply}"
        )
    )
    assert is_wrong_type(
        rexc.ResponseError(f"Error running script (call to f_0a1b): @user_script:3: {reply}")
    )
    assert not is_wrong_type(rexc.ResponseError("ERR no such key"))


NOT_OUTAGES: list[BaseException] = [
    rexc.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
    rexc.ResponseError("ERR unknown command 'BLMOVE'"),
    rexc.ResponseError("NOSCRIPT No matching script"),
    rexc.DataError("Invalid input"),
    # Followed by the cluster client: a slot migration is not an outage.
    rexc.MovedError("3999 127.0.0.1:6381"),
    rexc.AskError("3999 127.0.0.1:6381"),
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


REDIS6_WRONGTYPE = rexc.ResponseError(
    "Error running script (call to f_07b6882a659f9c986d7afa1305aec6bd787e1c3c): "
    "@user_script:26: WRONGTYPE Operation against a key holding the wrong kind of value"
)


def test_redis6_script_wrapper_is_seen_through() -> None:
    assert reply_text(REDIS6_WRONGTYPE).startswith("WRONGTYPE Operation")
    assert is_wrong_type(REDIS6_WRONGTYPE)
    assert not is_outage(REDIS6_WRONGTYPE)
    plain = rexc.ResponseError("WRONGTYPE Operation against a key")
    assert reply_text(plain) == str(plain)
    assert is_wrong_type(plain)


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


def test_failure_log_one_line_per_kind_per_episode(caplog: pytest.LogCaptureFixture) -> None:
    """A Redis error reply is said once without a traceback, a bug of ours once with one,
    and the success ending the episode says how many tries failed; WRONGTYPE calls the hook
    every time (the key guard rate-limits itself)."""
    from cogworker_async.store.faults import FailureLog, is_wrong_type

    logger = logging.getLogger("cogworker_async.tests.failures")
    caplog.set_level(logging.DEBUG, logger=logger.name)
    woken: list[int] = []
    log = FailureLog("Scheduled poller", logger, on_wrong_type=lambda: woken.append(1))
    wrong = rexc.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    assert is_wrong_type(wrong)
    assert not is_wrong_type(rexc.ResponseError("ERR something else"))
    for _ in range(50):
        log.failed(wrong)
    log.failed(rexc.NoPermissionError("this user has no permissions to run the 'zadd' command"))
    for _ in range(3):
        log.failed(KeyError("ours"))
    assert woken == [1] * 50
    assert log.failing
    assert not log.down  # no outage in this episode
    log.succeeded()
    log.succeeded()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3, messages
    assert messages[0].startswith("Scheduled poller: failing (ResponseError: WRONGTYPE")
    assert caplog.records[0].exc_info is None
    assert "a bug: please report it" in messages[1]
    assert caplog.records[1].exc_info is not None  # the traceback, once
    assert messages[2].startswith("Scheduled poller: recovered after 54 failure(s) in ")
    assert not log.failing


def test_failure_log_outage_inside_an_error_episode_ends_with_the_outage_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """metrics.py counts outages from the started/ended lines: each started one must end."""
    from cogworker_async.store.faults import FailureLog

    logger = logging.getLogger("cogworker_async.tests.failures2")
    caplog.set_level(logging.DEBUG, logger=logger.name)
    log = FailureLog("Fetch", logger)
    log.failed(rexc.ResponseError("WRONGTYPE Operation against a key"))
    log.failed(rexc.ConnectionError("Connection refused"))
    log.failed(rexc.ConnectionError("Connection refused"))
    assert log.down
    log.succeeded()
    messages = [r.getMessage() for r in caplog.records]
    assert [m.split(" (")[0].split(",")[0] for m in messages] == [
        "Fetch: failing",
        "Fetch: Redis unavailable",
        "Fetch: Redis is back",
        "Fetch: recovered after 3 failure(s) in 0.0 s",
    ]
