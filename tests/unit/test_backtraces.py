"""The bounded traceback text (``worker/backtraces.py``), its option and its log line."""

from __future__ import annotations

import json
import logging

import pytest

from cogworker_async import job
from cogworker_async.jobs import payload_options
from cogworker_async.observability.logfmt import JsonFormatter
from cogworker_async.settings import Settings
from cogworker_async.worker.backtraces import backtrace_frames, format_backtrace
from cogworker_async.worker.failure_log import log_failure


def _raised(fn: object) -> BaseException:
    try:
        fn()  # type: ignore[operator]
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def _wrapping() -> None:
    try:
        {}["missing"]
    except KeyError as exc:
        raise RuntimeError("wrapped") from exc


def _recursing(depth: int) -> None:
    if depth == 0:
        raise ValueError("bottom")
    _recursing(depth - 1)


def test_a_chain_is_printed_oldest_first_with_its_link() -> None:
    text = format_backtrace(_raised(_wrapping), frames=10, max_chars=4000)
    assert text is not None
    first, link, second = (
        text.index("KeyError: 'missing'"),
        text.index("direct cause"),
        text.index("RuntimeError: wrapped"),
    )
    assert first < link < second
    assert text.endswith("RuntimeError: wrapped")


def test_frames_keep_the_outermost_and_the_innermost() -> None:
    text = format_backtrace(_raised(lambda: _recursing(50)), frames=4, max_chars=100_000)
    assert text is not None
    assert text.count('  File "') == 4
    # _raised, the lambda, 51 _recursing: the outermost, then the innermost three.
    assert "[... 49 frames omitted ...]" in text
    assert "in _raised" in text.split("frames omitted")[0]
    assert text.endswith("ValueError: bottom")


@pytest.mark.parametrize("max_chars", [256, 1000, 4000])
def test_the_text_never_passes_its_cap(max_chars: int) -> None:
    def huge() -> None:
        raise ValueError("x" * 1_000_000)

    for exc in (_raised(huge), _raised(lambda: _recursing(900))):
        text = format_backtrace(exc, frames=1000, max_chars=max_chars)
        assert text is not None
        assert len(text) <= max_chars


def test_a_cut_keeps_the_end_and_says_so() -> None:
    text = format_backtrace(_raised(lambda: _recursing(60)), frames=1000, max_chars=600)
    assert text is not None
    assert text.startswith("[... ")
    assert "characters cut ...]\n" in text
    assert text.endswith("ValueError: bottom")


def test_an_exception_without_a_traceback_has_none() -> None:
    assert format_backtrace(ValueError("never raised"), frames=5, max_chars=1000) is None


def test_a_group_shows_its_members() -> None:
    def grouped() -> None:
        members = [_raised(lambda: _recursing(1)), _raised(_wrapping)]
        raise ExceptionGroup("two", members)  # type: ignore[type-var]

    text = format_backtrace(_raised(grouped), frames=10, max_chars=10_000)
    assert text is not None
    assert "ExceptionGroup: two (2 sub-exceptions)" in text
    assert "-- member 1 of 2 --" in text
    assert "ValueError: bottom" in text
    assert "RuntimeError: wrapped" in text


def test_a_cyclic_chain_ends() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first

    def raise_first() -> None:
        raise first

    assert format_backtrace(_raised(raise_first), frames=5, max_chars=5000) is not None


@pytest.mark.parametrize(
    ("option", "frames"),
    [(None, 20), (True, 20), (False, None), (0, None), (3, 3), ("yes", 20), (-1, 20)],
)
def test_the_backtrace_option(option: object, frames: int | None) -> None:
    assert backtrace_frames(option, 20) == frames


def test_the_option_is_checked_and_carried() -> None:
    with pytest.raises(TypeError, match="backtrace must be"):
        job(name="bt.bad", backtrace="yes")(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="backtrace must be"):
        job(name="bt.neg", backtrace=-2)(lambda: None)

    @job(name="bt.none", backtrace=False)
    async def quiet() -> None: ...

    settings = Settings()
    assert payload_options(quiet.defaults, settings)["backtrace"] is False
    assert payload_options(quiet.options(backtrace=5).options, settings)["backtrace"] == 5
    assert "backtrace" not in payload_options(job(name="bt.plain")(lambda: None).defaults, settings)


def test_the_log_line_carries_the_text_for_every_formatter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("cogworker_async.test_backtraces")
    caplog.set_level(logging.WARNING, logger=logger.name)
    failed = {"jid": "j1", "class": "x.y", "queue": "q", "error_class": "E", "error_message": "m"}
    log_failure(logger, failed, elapsed=0.5, outcome="buried in dead", terminal=True, trace="TB")
    log_failure(logger, failed, elapsed=0.5, outcome="retry 1", terminal=False, trace=None)
    dead, retried = caplog.records
    assert (dead.levelno, retried.levelno) == (logging.ERROR, logging.WARNING)
    assert dead.getMessage() == "jid=j1 x.y failed queue=q after 0.500 s: E: m; buried in dead"
    assert logging.Formatter("%(message)s").format(dead).endswith("buried in dead\nTB")
    assert json.loads(JsonFormatter().format(dead))["exc_info"] == "TB"
    assert "exc_info" not in json.loads(JsonFormatter().format(retried))


def test_an_exception_that_cannot_be_formatted_is_filed_without_one(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    from redis.asyncio import Redis

    from cogworker_async.keys import Keys
    from cogworker_async.worker import settlement

    def broken(*_: object, **__: object) -> str:
        raise RuntimeError("formatter bug")

    monkeypatch.setattr(settlement, "format_backtrace", broken)
    settler = settlement.Settler(
        Redis(),
        Keys("t"),
        Settings(),
        identity="i",
        logger=logging.getLogger("cogworker_async.test_backtraces"),
        rng=random.Random(1),
    )
    job_dict = {"jid": "a" * 24, "class": "x", "args": [], "queue": "q", "retry": 0}
    filing = settler.failed(b"raw", job_dict, _raised(_wrapping), None, 0.1)
    entry = json.loads(filing.entry)
    assert entry["error_class"] == "RuntimeError"
    assert "error_backtrace" not in entry
    assert "could not format a failure's traceback" in caplog.text
