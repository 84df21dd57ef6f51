"""Real headless Chromium (Debian's package, driven by Playwright) against a live system.

Run only with ``COGWORKER_BROWSER_TESTS=1`` (``make test-ui``): they start a
browser, the ``web`` command and a worker, each a subprocess, and take a few
seconds apiece. Playwright never downloads a browser here: it drives
``/usr/bin/chromium`` (``apt-get install chromium``) through ``executable_path``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from cogworker_async.settings import Settings
from tests.conftest import ROOT, child_env

CHROMIUM = os.environ.get("COGWORKER_CHROMIUM", "/usr/bin/chromium")
OUTPUT = Path(__file__).resolve().parent / "output"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("COGWORKER_BROWSER_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="browser tests: set COGWORKER_BROWSER_TESTS=1 (make test-ui)")
    for item in items:
        if "tests/browser/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: apt-get install chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.on(
        "console",
        lambda msg: errors.append(msg.text) if msg.type == "error" else None,
    )
    yield opened
    context.close()
    assert errors == [], errors  # no script error, no CSP violation


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture
def web(settings: Settings, tmp_path: Path) -> Iterator[str]:
    """``cogworker-async web`` on a free port: its base URL."""
    port = _free_port()
    log: IO[bytes] = (tmp_path / "web.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "cogworker_async", "web", "--port", str(port)],
        cwd=ROOT,
        env=child_env(settings),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(base + "/stats.json")
            break
        except httpx.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                _stop(server)
                raise AssertionError((tmp_path / "web.log").read_text()) from None
            time.sleep(0.1)
    yield base
    _stop(server)
    log.close()


@pytest.fixture
def worker(settings: Settings, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A worker process running ``tests.browser.jobs`` on queues ``default`` and ``slow``."""
    log: IO[bytes] = (tmp_path / "worker.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cogworker_async",
            "worker",
            "tests.browser.jobs",
            "-q",
            "default",
            "-q",
            "slow",
            "-c",
            "4",
        ],
        cwd=ROOT,
        env=child_env(settings),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield process
    _stop(process)
    log.close()


def shoot(page: Any, name: str) -> None:
    """A screenshot of the whole page under tests/browser/output/."""
    OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUTPUT / f"{name}.png"), full_page=True)
