"""Progress without Redis: the checks of ``progress(fraction, message)``, how a
status shows it, and ``ProgressWriter``'s coalescing (a fake writer counts)."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from typing import Any

import pytest

from cogworker_async import context
from cogworker_async.context import PROGRESS_MESSAGE_MAX, check_fraction, check_message
from cogworker_async.store.status import JobStatus, Progress
from cogworker_async.worker.progress import ProgressWriter

JID = "0a1b2c3d4e5f60718293a4b7"


@pytest.mark.parametrize("fraction", [0, 0.0, 0.4, 1, 1.0])
def test_fractions_from_0_to_1_are_taken(fraction: float) -> None:
    assert check_fraction(fraction) == float(fraction)


@pytest.mark.parametrize(
    ("fraction", "error"),
    [
        (1.01, ValueError),
        (-0.01, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (40, ValueError),  # a percentage where a fraction was meant
        ("0.4", TypeError),
        (None, TypeError),
        (True, TypeError),
    ],
)
def test_other_fractions_are_refused_naming_the_argument(
    fraction: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match=r"progress\(fraction="):
        check_fraction(fraction)


def test_messages_are_str_and_clipped() -> None:
    assert check_message(None) is None
    assert check_message("half") == "half"
    clipped = check_message("x" * 1000)
    assert clipped is not None
    assert len(clipped) == PROGRESS_MESSAGE_MAX
    assert clipped.endswith("\u2026")
    with pytest.raises(TypeError, match=r"progress\(message=\.\.\.\) takes a str or None"):
        check_message(b"bytes")


def test_a_status_gives_its_progress_by_key_and_as_json() -> None:
    status = JobStatus(JID, "working", progress=Progress(0.405, "resized", 1.5))
    assert status["progress"] == {"fraction": 0.405, "message": "resized", "updated_at": 1.5}
    assert status["state"] == "working"
    assert status["error_class"] is None
    with pytest.raises(KeyError):
        status["nothing"]
    assert json.loads(json.dumps(status.as_dict()))["progress"]["fraction"] == 0.405
    assert JobStatus(JID, "queued")["progress"] is None
    assert Progress(0.4).percent == "40%"
    assert Progress(0.405).percent == "40.5%"
    assert Progress(1.0, "done", 2.0).describe() == "100% done (at 2.0)"


class CountingWriter:
    """Stands in for ``StatusWriter``: keeps each write's fields."""

    def __init__(self) -> None:
        self.writes: list[dict[str, Any]] = []

    def write(
        self, jid: str, fields: dict[str, Any], *, after: asyncio.Task[None] | None = None
    ) -> asyncio.Task[None] | None:
        self.writes.append(dict(fields))
        return None


@pytest.mark.anyio
async def test_reports_are_coalesced_and_the_last_waits_for_the_end() -> None:
    status = CountingWriter()
    progress = ProgressWriter(status, interval=3600)  # no second write within the test
    progress.begin(JID, None)
    try:
        for done in range(1, 1001):
            context.report_progress(JID, "t.job", done / 1000, f"{done} of 1000")
        await asyncio.sleep(0)
        assert [w["progress"] for w in status.writes] == [0.001]  # the first, at once
        after, pending = progress.finish(JID, None)
    finally:
        context.unregister_progress(JID, progress)
    assert pending is not None
    assert pending["progress"] == 1.0  # the latest: the final status write takes it
    assert pending["progress_message"] == "1000 of 1000"
    assert after is None
    progress.report(JID, 0.5, None)  # after its end: nothing
    assert len(status.writes) == 1


@pytest.mark.anyio
async def test_a_thread_reports_through_the_loop_at_the_rate() -> None:
    status = CountingWriter()
    progress = ProgressWriter(status, interval=0.05)
    progress.begin(JID, None)

    def handler() -> None:
        for done in range(1, 20_001):
            progress.report(JID, done / 20_000, None)

    thread = threading.Thread(target=handler)
    thread.start()
    while thread.is_alive():
        await asyncio.sleep(0.01)
    thread.join()
    await asyncio.sleep(0.2)  # the last coalesced write, one interval on
    _, pending = progress.finish(JID, None)
    assert pending is None
    assert status.writes[-1]["progress"] == 1.0  # the latest value, written
    assert len(status.writes) < 1000  # not one write per report
