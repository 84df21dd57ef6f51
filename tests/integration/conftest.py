"""Fixtures shared by the integration tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.helpers import stop_processes


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes a test starts: stopped (gracefully, then killed) after it."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    stop_processes(started)
