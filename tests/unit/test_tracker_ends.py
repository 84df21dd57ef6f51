"""A tracked success's end as its ack carries it (``Tracker.success_end``), and its
``working`` write's way to a call (``Fetcher.send_start``), without Redis.

The ``working`` write waits in the fetcher's book as a flat list; an end that
finds it there writes one status, edited from it; a result is kept in the
one-key shape (``store/results.py``).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import orjson
import pytest

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store.commands import Start
from cogworker_async.store.commands.acks import _end_args
from cogworker_async.worker.acks import AckBook
from cogworker_async.worker.fetcher import START_RIDE_FOR
from cogworker_async.worker.tracking import Tracker
from tests.unit.test_fetch_sources import fetcher

pytestmark = pytest.mark.anyio

JID = "ab" * 12


def _tracker() -> tuple[Tracker, AckBook]:
    tracker = Tracker(None, Keys("ns"), Settings(), logging.getLogger("test"))  # type: ignore[arg-type]
    book = AckBook()
    tracker.send_start, tracker.take_start = book.add_start, book.take_start
    return tracker, book


def _job(**extra: Any) -> dict[str, Any]:
    return {"jid": JID, "class": "t.job", "queue": "q", "args": [], **extra}


def _fields(status: bytes) -> dict[str, str]:
    flat = orjson.loads(status)
    fields: dict[str, str] = {}
    for name, value in zip(flat[::2], flat[1::2], strict=True):
        fields[name] = value  # later pairs stand, as in the script's HSET
    return fields


async def test_an_end_that_finds_its_start_waiting_writes_both_as_one() -> None:
    tracker, book = _tracker()
    job = _job(status=True, retry_count=2)
    tracker.started(0, job, None, 100.5)
    end = tracker.success_end(0, job, None, None)
    assert end is not None
    assert book.take_starts() == []  # taken over by the end
    fields = _fields(end.status)
    assert fields["state"] == "complete"
    assert fields["class"] == "t.job"
    assert fields["queue"] == "q"
    assert fields["started_at"] == "100.5"
    assert fields["retry_count"] == "2"
    assert fields["progress"] == ""  # a retry's: its last try's cleared
    assert fields["updated_at"] == fields["finished_at"]
    assert float(fields["finished_at"]) > 100.5
    assert end.envelope == b""


async def test_a_start_already_sent_leaves_the_end_only_what_changed() -> None:
    tracker, book = _tracker()
    job = _job(status=True)
    tracker.started(0, job, None, 100.5)
    [start] = book.take_starts()  # a call carries it
    assert isinstance(start.fields, list)
    assert _fields(orjson.dumps(start.fields))["state"] == "working"
    end = tracker.success_end(0, job, None, None)
    assert end is not None
    assert set(_fields(end.status)) == {"state", "finished_at", "updated_at"}


async def test_a_start_is_encoded_flat_by_the_call_that_carries_it() -> None:
    start = Start(JID, ["state", "working", "queue", "q"], 1.0, 60)
    args = _end_args(Keys("ns"), [], [start])
    assert orjson.loads(args[-3]) == ["state", "working", "queue", "q"]  # type: ignore[arg-type]


async def test_the_last_progress_goes_with_the_final_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tracker, _ = _tracker()
    written: list[dict[str, Any]] = []
    monkeypatch.setattr(tracker.status, "write", lambda jid, fields, **_: written.append(fields))
    job = _job(status=True, retry_count=1)
    tracker.started(0, job, None, 100.5)
    tracker.progress.report(JID, 0.25, "a quarter")  # the first: written at once
    tracker.progress.report(JID, 0.5, "half")  # within the interval: waits
    end = tracker.success_end(0, job, None, None)
    assert end is not None
    fields = _fields(end.status)
    assert fields["progress"] == "0.5"  # over the retry's cleared one
    assert fields["progress_message"] == "half"
    assert fields["state"] == "complete"
    assert [w["progress"] for w in written] == [0.25]


async def test_a_kept_result_is_one_key_its_ttl_the_keeping_and_gone_for() -> None:
    tracker, _ = _tracker()
    end = tracker.success_end(0, _job(keep_result=600), None, {"n": 1})
    assert end is not None
    assert end.status == b""
    assert orjson.loads(end.envelope) == {"ok": True, "value": {"n": 1}, "gone_for": 600}
    assert end.result_ttl == 1200
    assert tracker.success_end(0, _job(), None, 1) is None  # neither: a plain ack


async def test_a_start_rides_the_next_call_or_goes_after_a_moment() -> None:
    """No call of its own at once (a quick job's end takes it back); with no call
    meanwhile, the lanes are kicked after ``START_RIDE_FOR``."""
    f = fetcher("q")
    f.send_start(Start(JID, ["state", "working"], 1.0, 60))
    f.send_start(Start("cd" * 12, ["state", "working"], 1.0, 60))  # one timer for both
    assert not f._kick.is_set()
    with anyio.fail_after(5):
        await f._kick.wait()
    assert f._acks.starts_waiting
    f._kick.clear()
    assert f.take_start(JID) is not None
    assert f.take_start("cd" * 12) is not None
    f.send_start(Start(JID, ["state", "working"], 1.0, 60))
    assert f.take_start(JID) is not None  # its end took it back: nothing to send
    await anyio.sleep(START_RIDE_FOR * 3)  # why: asserting the kick did not come
    assert not f._kick.is_set()
