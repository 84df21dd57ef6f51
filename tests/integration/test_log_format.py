"""``worker --log-format json``: every line the worker logs is one JSON object."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from cogworker_async.settings import Settings
from tests.conftest import spawn_worker_command
from tests.helpers import wait_for_sync


def run_worker(settings: Settings, tmp_path: Path, *extra: str) -> list[str]:
    """Start a worker, wait until it says it started, stop it; its log lines."""
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = spawn_worker_command(settings, log, *extra)
        try:
            wait_for_sync(lambda: " started: " in log_path.read_text(), timeout=20)
        finally:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(timeout=20)
    text = log_path.read_text()
    assert code == 0, text
    return text.splitlines()


def test_json_lines_parse(settings: Settings, tmp_path: Path) -> None:
    lines = run_worker(settings, tmp_path, "--log-format", "json")
    records = [json.loads(line) for line in lines]
    assert len(records) >= 2  # started, stopping
    for record in records:
        assert set(record) >= {"time", "level", "logger", "message"}
        assert record["time"].endswith("+00:00")
    started = [r for r in records if " started: " in r["message"]]
    assert started
    assert started[0]["level"] == "INFO"
    assert started[0]["logger"] == "cogworker_async.worker"


def test_text_stays_the_default(settings: Settings, tmp_path: Path) -> None:
    lines = run_worker(settings, tmp_path)
    assert any(" INFO cogworker_async.worker: worker " in line for line in lines)
    assert not any(line.startswith("{") for line in lines)
