"""The dashboard in Chromium (issue 25, item 6): uPlot charts with axes, a cursor
readout and a range; the Busy card; polls that never overlap; a phone-width layout."""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Any

import redis as sync_redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.browser.conftest import shoot
from tests.browser.test_ui import enqueue, live_process, wait_until
from tests.web.conftest import seed_odd

PHONE = {"width": 375, "height": 800}
DESKTOP = {"width": 1280, "height": 900}


def test_live_chart_has_axes_a_cursor_readout_and_a_range(
    page: Any, web: str, worker: subprocess.Popen[bytes], settings: Settings
) -> None:
    live_process(settings)
    page.goto(web + "/")
    chart = page.locator("#live")
    enqueue(settings, "b.ok", [1], "default", times=20)
    wait_until(lambda: int(chart.get_attribute("data-points") or 0) >= 3, what="3 live points")
    assert page.locator("#live canvas").count() == 1
    assert page.locator("#live .u-axis").count() == 2  # time and jobs/s
    assert page.locator("#per-day .u-axis").count() == 2
    # The cursor over the chart: the legend reads out the values under it (the tooltip).
    box = chart.locator(".u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] - 3, box["y"] + box["height"] / 2)
    readout = chart.locator(".u-legend .u-series").nth(1).locator(".u-value")
    wait_until(lambda: readout.inner_text() not in ("", "--"), what="a value under the cursor")
    # A range: the x axis spans what was chosen.
    assert chart.get_attribute("data-span") == "300"  # the default: five minutes
    page.select_option("#live-range", "60")
    wait_until(lambda: chart.get_attribute("data-span") == "60", what="the x axis over 1 minute")
    shoot(page, "dashboard-live-1280")
    page.set_viewport_size(PHONE)
    page.reload()
    wait_until(lambda: int(chart.get_attribute("data-points") or 0) >= 1, what="a point at 375")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shoot(page, "dashboard-live-375")


def test_the_busy_card_shows_the_jobs_running_now(
    page: Any, web: str, worker: subprocess.Popen[bytes], settings: Settings
) -> None:
    live_process(settings)
    page.goto(web + "/")
    busy = page.locator("[data-stat=busy]")
    assert busy.inner_text() == "0"
    enqueue(settings, "b.sleep", [6], "slow", times=2)
    wait_until(lambda: busy.inner_text() == "2", timeout=30, what="2 busy on the card")
    shoot(page, "dashboard-busy-1280")


def test_polls_never_overlap_when_the_feed_is_slow(page: Any, web: str) -> None:
    in_flight = 0
    most = 0
    answered = 0
    lock = threading.Lock()

    def slow(route: Any) -> None:
        nonlocal in_flight, most, answered
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        time.sleep(3.0)  # Redis slower than the 2 s pace
        route.continue_()
        with lock:
            in_flight -= 1
            answered += 1

    page.route("**/stats.json", slow)
    page.goto(web + "/")
    deadline = time.monotonic() + 30
    while answered < 3 and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert answered >= 3
    assert most == 1


def test_every_page_fits_a_phone(
    browser: Any, web: str, settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    """At 375 px no page scrolls sideways: wide tables scroll within themselves."""
    seed_odd(sync_client, keys)
    for viewport, suffix in ((PHONE, "375"), (DESKTOP, "1280")):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        for name, path in [
            ("dashboard", "/"),
            ("busy", "/busy"),
            ("queues", "/queues"),
            ("queue", "/queues/mail"),
            ("dead", "/dead"),
            ("retries", "/retries"),
            ("metrics", "/metrics"),
        ]:
            page.goto(web + path)
            if viewport is PHONE:
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= PHONE["width"], (path, width)
            shoot(page, f"{name}-{suffix}")
        context.close()
        assert errors == [], errors


def test_a_jobs_metrics_page_with_its_chart(
    browser: Any, web: str, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    last = int(time.time() // 60)
    for minute in range(last - 30, last + 1):
        sync_client.hset(
            keys.history(minute),
            mapping={
                "report.build|h3": minute % 7,
                "report.build|f": minute % 2,
                "report.build|us": 900_000,
            },
        )
    for viewport, suffix in ((DESKTOP, "1280"), (PHONE, "375")):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        page.on(
            "console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None
        )
        page.goto(web + "/metrics?minutes=240")
        assert page.locator("strong", has_text="240 min").count() == 1
        page.get_by_role("link", name="report.build").click()
        page.wait_for_selector("#job-chart canvas")
        assert page.locator("#job-chart .u-axis").count() == 2
        assert page.locator("#job-totals").inner_text().count("runs") == 1
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        shoot(page, f"job-metrics-{suffix}")
        context.close()
        assert errors == [], errors


def test_a_jid_typed_in_the_nav_is_found(
    browser: Any, web: str, settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    (jid,) = enqueue(settings, "b.ok", [1], "parked")  # no worker takes from "parked"
    for viewport, suffix in ((DESKTOP, "1280"), (PHONE, "375")):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        page.goto(web + "/dead")
        box = page.locator("form.lookup input[name=jid]")
        box.fill(jid)
        box.press("Enter")
        page.wait_for_selector("#found")
        assert "parked" in page.locator("#found").inner_text()
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        shoot(page, f"job-lookup-{suffix}")
        page.get_by_role("link", name="parked").click()
        assert page.url.endswith("/queues/parked")
        context.close()
        assert errors == [], errors


def test_the_metrics_overview_chart_has_axes(
    page: Any, web: str, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    last = int(time.time() // 60)
    for minute in range(last - 20, last + 1):
        sync_client.hset(keys.history(minute), mapping={"a.job|h0": minute % 5, "a.job|f": 1})
    page.goto(web + "/metrics?minutes=30")
    page.wait_for_selector("#minutes-chart canvas")
    assert page.locator("#minutes-chart .u-axis").count() == 2
    shoot(page, "metrics-chart-1280")


def test_the_queue_table_follows_each_poll_and_shows_names_as_text(
    page: Any, web: str, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    page.goto(web + "/")
    rows = page.locator("#queue-rows")
    assert rows.inner_text().strip() == "no queues yet"
    # Queues that appear after the page loaded, one named like markup.
    hostile = "<img src=x onerror=document.title='owned'>"
    for name, size in (("late", 3), (hostile, 1)):
        sync_client.sadd(keys.queues, name)
        for i in range(size):
            sync_client.lpush(keys.queue(name), f'{{"jid":"j{i}","class":"x"}}')
    wait_until(lambda: "late" in rows.inner_text(), what="a queue made after the page loaded")
    assert rows.locator("a", has_text="late").get_attribute("href") == "/queues/late"
    assert rows.get_by_text(hostile, exact=True).count() == 1  # shown as its text
    assert rows.locator("img").count() == 0  # never parsed as HTML
    # Drained: the next poll says so.
    sync_client.delete(keys.queue("late"))
    wait_until(
        lambda: rows.locator("tr", has_text="late").locator("td.num").first.inner_text() == "0",
        what="the drained queue's size",
    )
    assert page.title() != "owned"
