"""A running job's progress in Chromium (issue 25 §6): its bar on the job page found
by the search box and on the Busy page, at desktop and phone widths."""

from __future__ import annotations

import subprocess
from typing import Any

import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.browser.conftest import shoot
from tests.browser.test_ui import enqueue, live_process, wait_until

PHONE = {"width": 375, "height": 800}


def test_a_running_jobs_progress_bar_on_its_page_and_on_busy(
    page: Any,
    browser: Any,
    web: str,
    worker: subprocess.Popen[bytes],
    settings: Settings,
    sync_client: sync_redis.Redis,
    keys: Keys,
) -> None:
    live_process(settings)
    (jid,) = enqueue(settings, "b.progress", [60], "default")
    wait_until(
        lambda: sync_client.hget(keys.status(jid), "progress") is not None,
        what="the job reported its progress",
    )
    page.goto(web + "/")
    search = page.get_by_label("find a job by jid")
    search.fill(jid)
    search.press("Enter")
    page.wait_for_url("**/jobs?jid=*")
    bar = page.locator("#progress")
    assert bar.get_attribute("value") == "0.4"
    assert "resized 40 of 100 images" in page.locator("#status").inner_text()
    assert "working" in page.locator("#status").inner_text()
    shoot(page, "job-progress")

    # The job's start asks for an early beat: Busy shows it within a fraction of
    # the heartbeat interval (reloaded until then, not read once).
    def on_busy() -> bool:
        page.goto(web + "/busy")
        return page.locator("tr", has_text="b.progress").locator("progress").count() == 1

    wait_until(on_busy, what="the running job and its bar on /busy")
    shoot(page, "busy-progress")
    phone = browser.new_context(viewport=PHONE)
    small = phone.new_page()
    try:
        for name, path in (("job-progress-375", f"/jobs?jid={jid}"), ("busy-375", "/busy")):
            answer = small.goto(web + path)
            assert answer is not None
            assert answer.status == 200, path
            width = small.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], (path, width)
            shoot(small, name)
    finally:
        phone.close()
