"""What enqueue by name makes of the live processes' presence info (pure)."""

from __future__ import annotations

import orjson

from cogworker_async.client.by_name import _live_problems, _live_process


def _process(queues: list[str], jobs: list[str] | None) -> bytes:
    info: dict[str, object] = {"identity": "h:1:aa", "queues": queues}
    if jobs is not None:
        info["jobs"] = jobs
    return orjson.dumps(info)


def test_a_reader_that_knows_the_name_serves_it() -> None:
    live = [_live_process(_process(["default"], ["a.job"]))]
    assert _live_problems([p for p in live if p], "a.job", "default") == ([], True)


def test_a_process_that_does_not_list_its_jobs_is_not_held_against_the_name() -> None:
    # An older worker (no "jobs" in its info) might know it: no warning, not confirmed.
    live = [_live_process(_process(["default"], None))]
    assert _live_problems([p for p in live if p], "a.job", "default") == ([], False)


def test_unreadable_presence_is_skipped() -> None:
    assert _live_process(b"{not json") is None
    assert _live_process(b"[1]") is None
    assert _live_process(None) is None


def test_queue_read_by_nobody_names_what_is_read() -> None:
    live = [_live_process(_process(["mail", "default"], ["a.job"]))]
    warnings, served = _live_problems([p for p in live if p], "a.job", "urgent")
    assert served is False
    assert warnings == [
        "no live process reads queue 'urgent' (they read: default, mail): "
        "the job waits there until one does"
    ]
