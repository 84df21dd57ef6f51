"""The documentation's pictures of the dashboard, made from a live system.

``make docs-images`` runs this with ``COGWORKER_DOCS_IMAGES=1`` and writes
``docs/images/dashboard-desktop.png`` (1280 px) and ``dashboard-phone.png``
(375 px), shown in ``docs/guides/web-ui.md``. Without that variable (``make
test-ui``) the same pictures go to ``tests/browser/output/`` and the committed
ones are left alone. A worker runs jobs all along, some fail, some wait on a
queue nobody reads, some are scheduled, and two weeks of history are seeded, so
every part of the page has something to show.
"""

from __future__ import annotations

import os
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import redis as sync_redis

from cogworker_async import Client
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store.commands import day_name
from tests.browser.conftest import OUTPUT
from tests.browser.test_ui import enqueue, live_process, off_loop, wait_until
from tests.conftest import ROOT

DOCS_IMAGES = ROOT / "docs" / "images"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 800}


def _target() -> Path:
    folder = DOCS_IMAGES if os.environ.get("COGWORKER_DOCS_IMAGES") == "1" else OUTPUT
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _png_width(path: Path) -> int:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width: int = struct.unpack(">I", header[16:20])[0]
    return width


def _seed_history(r: sync_redis.Redis, keys: Keys) -> None:
    """Two weeks of daily totals before today: the per-day chart's shape."""
    today = int(time.time() // 86_400)
    for back in range(1, 14):
        day = day_name(today - back)
        processed = 9_000 + 700 * ((back * 5) % 7)
        r.set(keys.stats_processed_on(day), processed)
        r.set(keys.stats_failed_on(day), 40 + 25 * (back % 4))


def _schedule(settings: Settings, delays: list[float]) -> None:
    async def go() -> None:
        async with Client(settings) as client:
            for delay in delays:
                await client.enqueue_by_name("b.ok", [1], {}, delay=delay)

    off_loop(go)


def _keep_busy(settings: Settings, stop: threading.Event) -> None:
    """A steady trickle of work, so the live chart has rates to draw."""
    while not stop.is_set():
        enqueue(settings, "b.ok", [1], "default", times=25)
        stop.wait(0.7)


def _shoot(page: Any, viewport: dict[str, int], url: str, path: Path, points: int) -> None:
    page.set_viewport_size(viewport)
    page.goto(url)
    page.select_option("#live-range", "60")  # a minute: the trickle fills the chart's width
    chart = page.locator("#live")
    wait_until(
        lambda: int(chart.get_attribute("data-points") or 0) >= points,
        timeout=60,
        what=f"{points} live points at {viewport['width']} px",
    )
    assert page.locator("#queue-rows a", has_text="mail").count() == 1
    assert page.locator("[data-stat=processed]").inner_text() != "0"
    page.mouse.move(0, 0)  # no cursor readout frozen into the picture
    page.screenshot(path=str(path), full_page=True)


def test_dashboard_screenshots_for_the_docs(
    page: Any,
    web: str,
    worker: subprocess.Popen[bytes],
    settings: Settings,
    sync_client: sync_redis.Redis,
    keys: Keys,
) -> None:
    _seed_history(sync_client, keys)
    live_process(settings)
    # Jobs the worker does not run right away: a queue it does not read, a few
    # scheduled ones, and failures that end in dead.
    enqueue(settings, "b.ok", [1], "mail", times=12)
    _schedule(settings, [600, 1800, 3600])
    enqueue(settings, "b.fails_first", ["docs"], "default", times=3)
    stop = threading.Event()
    trickle = threading.Thread(target=_keep_busy, args=(settings, stop), daemon=True)
    trickle.start()
    try:
        folder = _target()
        desktop = folder / "dashboard-desktop.png"
        phone = folder / "dashboard-phone.png"
        _shoot(page, DESKTOP, web + "/", desktop, points=16)
        _shoot(page, PHONE, web + "/", phone, points=12)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        stop.set()
        trickle.join(timeout=30)
    assert _png_width(desktop) == DESKTOP["width"]
    assert _png_width(phone) == PHONE["width"]
    assert int(sync_client.zcard(keys.dead)) >= 1
