"""The supervisor judges a child's memory only once the child handles SIGTERM:
the child says so with one byte on a pipe the supervisor named (a SIGTERM
before that kills it outright, status -15, instead of stopping it gracefully)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from cogworker_async.swarm import Child
from cogworker_async.worker.signals import READY_FD_ENV, tell_supervisor_ready


def child_with_pipe() -> tuple[Child, int]:
    ours, theirs = os.pipe()
    os.set_blocking(ours, False)
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return Child(process, time.monotonic(), ready_fd=ours), theirs


def test_a_child_that_has_not_said_ready_is_not_judged_then_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    child, theirs = child_with_pipe()
    try:
        assert not child.handles_stop()
        monkeypatch.setenv(READY_FD_ENV, str(theirs))
        tell_supervisor_ready()
        assert READY_FD_ENV not in os.environ  # said once; grandchildren don't inherit it
        assert child.handles_stop()
        assert child.ready_fd is None  # heard: the pipe is closed
        assert child.handles_stop()
    finally:
        child.close_pipe()


def test_a_pipe_closed_without_a_word_counts_as_ready() -> None:
    child, theirs = child_with_pipe()
    os.close(theirs)
    assert child.handles_stop()


def test_no_supervisor_no_pipe_nothing_to_say(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(READY_FD_ENV, raising=False)
    tell_supervisor_ready()  # a worker started by hand: nothing happens
    monkeypatch.setenv(READY_FD_ENV, "not-a-number")
    tell_supervisor_ready()
    assert READY_FD_ENV not in os.environ
