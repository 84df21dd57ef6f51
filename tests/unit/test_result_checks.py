"""What a result wait can tell without waiting: a finished job that kept nothing,
and no live process to run it (pure functions, no Redis)."""

from __future__ import annotations

import pytest

from cogworker_async.client.by_name import _LiveProcess, _reader_problem
from cogworker_async.client.result_checks import (
    FinishedUnkept,
    finished_unkept,
    not_kept,
    unkept_error,
)
from cogworker_async.errors import ResultExpired, ResultNotKept, ResultTimeout


@pytest.mark.parametrize("state", [b"complete", b"failed", b"dead", "complete"])
def test_a_finished_state_with_nothing_kept_is_told(state: bytes | str) -> None:
    found = finished_unkept(state, None, 0)
    assert isinstance(found, FinishedUnkept)
    assert found.state == (state.decode() if isinstance(state, bytes) else state)


@pytest.mark.parametrize(
    ("state", "result", "gone"),
    [
        (b"queued", None, 0),
        (b"working", None, 0),
        (b"retrying", None, 0),
        (b"scheduled", None, 0),
        (b"aborted", None, 0),  # a client's abort writes status, then result
        (None, None, 0),  # untracked
        (b"complete", b"{}", 0),  # a result is there
        (b"complete", None, 1),  # its marker is: expired, said as such
        (b"complete", None, True),
        (Exception("WRONGTYPE"), None, 0),  # a status of the wrong type says nothing
    ],
)
def test_anything_else_says_nothing(state: object, result: object, gone: object) -> None:
    assert finished_unkept(state, result, gone) is None


def test_the_error_says_how_to_ask_for_a_result() -> None:
    error = not_kept("j" * 24, "keeps no result (its payload has no keep_result)")
    assert isinstance(error, ResultTimeout)  # what such a wait used to end in
    assert str(error) == (
        f"job {'j' * 24} keeps no result (its payload has no keep_result), so no result"
        " will come: ask for one with keep_result= on the job (@job(keep_result=600)) or"
        " its .options(keep_result=600), or for every job with the keep_result setting"
    )


def test_a_job_known_to_keep_its_result_finished_with_none_left_is_expired() -> None:
    found = FinishedUnkept("dead")
    assert type(unkept_error("j1", found, True)) is ResultExpired
    assert type(unkept_error("j1", found, None)) is ResultNotKept
    assert "finished (dead) and keeps no result" in str(unkept_error("j1", found, False))


def test_the_reader_problem_names_the_queue_or_no_process() -> None:
    reads_default = _LiveProcess(frozenset({"default"}), None)
    assert _reader_problem([], "mail") == (
        "no live process is running: the job waits on queue 'mail' until one reads it"
    )
    assert _reader_problem([], None) == (
        "no live process is running: the job waits on its queue until one reads it"
    )
    assert _reader_problem([reads_default], "mail") == (
        "no live process reads queue 'mail' (they read: default): the job waits there until"
        " one does"
    )
    assert _reader_problem([reads_default], "default") is None
    assert _reader_problem([reads_default], None) is None  # a queue not known: any process
