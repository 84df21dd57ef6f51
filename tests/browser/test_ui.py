"""The web UI in real headless Chromium, with a worker running: what an operator sees and does."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import redis as sync_redis

from cogworker_async import api
from cogworker_async.client import Client
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from tests.browser.conftest import shoot
from tests.web.conftest import seed_odd

T = TypeVar("T")


def off_loop(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine on a thread of its own: Playwright's sync API holds this thread's loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def enqueue(
    settings: Settings, name: str, args: list[Any], queue: str, times: int = 1
) -> list[str]:
    async def go() -> list[str]:
        async with Client(settings) as client:
            return [
                (await client.enqueue_by_name(name, args, {}, queue=queue)).jid
                for _ in range(times)
            ]

    return off_loop(go)


def wait_until(condition: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)


def runs(r: sync_redis.Redis, keys: Keys) -> list[str]:
    return [x.decode() for x in r.lrange(f"{keys.ns}:test:runs", 0, -1)]


def live_process(settings: Settings) -> api.ProcessInfo:
    async def go() -> list[api.ProcessInfo]:
        async with Client(settings) as client:
            return await api.processes(client.redis, Keys(settings.namespace))

    found: list[api.ProcessInfo] = []

    def alive() -> bool:
        found[:] = [p for p in off_loop(go) if p.alive]
        return bool(found)

    wait_until(alive, what="the worker's first beat")
    return found[0]


def test_dashboard_counts_move_and_the_live_chart_pauses(
    page: Any, web: str, worker: subprocess.Popen[bytes], settings: Settings
) -> None:
    live_process(settings)
    page.goto(web + "/")
    processed = page.locator("[data-stat=processed]")
    assert processed.inner_text() == "0"
    enqueue(settings, "b.ok", [1], "default", times=25)
    wait_until(lambda: int(processed.inner_text()) >= 25, what="processed count on the page")
    page.reload()  # the per-day chart and the queue table as they are now
    chart = page.locator("#live")
    for _ in range(3):  # work arriving while the page polls: the live chart moves
        enqueue(settings, "b.ok", [1], "default", times=10)
        time.sleep(1.0)
    wait_until(
        lambda: int(chart.get_attribute("data-points") or 0) >= 2,
        what="the live chart drawn",
    )
    assert int(processed.inner_text()) >= 55
    shoot(page, "dashboard")
    toggle = page.locator("#live-toggle")
    toggle.click()
    assert toggle.inner_text() == "Resume"
    assert page.locator("#live-state").inner_text() == "paused"
    toggle.click()
    assert toggle.inner_text() == "Pause"


def test_pausing_a_queue_stops_the_worker_taking_from_it(
    page: Any,
    web: str,
    worker: subprocess.Popen[bytes],
    settings: Settings,
    sync_client: sync_redis.Redis,
    keys: Keys,
) -> None:
    live_process(settings)
    sync_client.sadd(keys.queues, "slow")
    page.goto(web + "/queues")
    page.locator("tr", has_text="slow").get_by_role("button", name="Pause").click()
    assert "paused slow" in page.locator(".note").inner_text()
    assert sync_client.sismember(keys.paused, "slow")
    enqueue(settings, "b.ok", [2], "slow", times=3)
    time.sleep(2.0)  # four idle intervals: a worker still reading slow would have taken them
    assert runs(sync_client, keys) == []
    assert sync_client.llen(keys.queue("slow")) == 3
    shoot(page, "queues")
    page.locator("tr", has_text="slow").get_by_role("button", name="Resume").click()
    wait_until(lambda: len(runs(sync_client, keys)) == 3, what="the queue's jobs run after resume")


def test_a_dead_job_found_by_search_and_retried_runs_once(
    page: Any,
    web: str,
    worker: subprocess.Popen[bytes],
    settings: Settings,
    sync_client: sync_redis.Redis,
    keys: Keys,
) -> None:
    live_process(settings)
    (jid,) = enqueue(settings, "b.fails_first", ["needle-7f3"], "default")
    enqueue(settings, "b.fails_first", ["other"], "default")
    wait_until(lambda: sync_client.zcard(keys.dead) == 2, what="both jobs dead")
    page.goto(web + "/dead")
    page.get_by_label("search").fill("needle-7f3")
    page.get_by_role("button", name="Search").click()
    rows = page.locator("#rows tbody tr")
    assert rows.count() == 1
    assert "first run of needle-7f3 fails on purpose" in rows.inner_text()
    shoot(page, "dead-search")
    rows.locator("a").first.click()
    assert jid in page.locator("h1").inner_text()
    shoot(page, "dead-entry")
    page.go_back()
    page.get_by_label(f"select {jid}").check()
    page.locator("#rows").get_by_role("button", name="Retry now").click()
    assert "moved 1 onto their queues" in page.locator(".note").inner_text()
    wait_until(lambda: runs(sync_client, keys).count(jid) == 2, what="the retried job ran")
    time.sleep(1.0)
    assert runs(sync_client, keys).count(jid) == 2  # one failed run, one retried: not three
    assert sync_client.zcard(keys.dead) == 1


def test_quiet_from_busy_stops_the_process_fetching(
    page: Any,
    web: str,
    worker: subprocess.Popen[bytes],
    settings: Settings,
    sync_client: sync_redis.Redis,
    keys: Keys,
) -> None:
    process = live_process(settings)
    page.goto(web + "/busy")
    shoot(page, "busy")
    page.locator("tr", has_text=process.identity).get_by_role("button", name="Quiet").click()
    assert "sent quiet to 1 process" in page.locator(".note").inner_text()
    wait_until(lambda: live_process(settings).quiet is True, what="the process says it is quiet")
    page.reload()
    assert "quiet" in page.locator("tr", has_text=process.identity).inner_text()
    enqueue(settings, "b.ok", [3], "default")
    time.sleep(2.0)
    assert runs(sync_client, keys) == []
    assert sync_client.llen(keys.queue("default")) == 1


def test_every_page_in_the_browser(
    page: Any, web: str, settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    """Odd data everywhere: every page loads without a script error or CSP violation."""
    seed_odd(sync_client, keys)
    sync_client.set(keys.unique("ui.sync:0f1e2d3c"), "a" * 24, ex=600)  # a lock, orphaned
    for name, path in [
        ("overview", "/"),
        ("busy-odd", "/busy"),
        ("queues-odd", "/queues"),
        ("queue", "/queues/mail"),
        ("scheduled", "/scheduled"),
        ("retries", "/retries"),
        ("dead", "/dead"),
        ("periodic", "/periodic"),
        ("locks", "/locks"),
        ("quarantine", "/quarantine"),
        ("metrics", "/metrics"),
    ]:
        answer = page.goto(web + path)
        assert answer is not None
        assert answer.status == 200, path
        assert page.locator("script:not([src])").count() == 0
        assert page.evaluate("document.title")  # rendered, not an error page
        shoot(page, name)
    # The dark theme, as a browser that prefers it sees the pages.
    page.emulate_media(color_scheme="dark")
    page.goto(web + "/dead")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(22, 24, 27)"
    shoot(page, "dead-dark")
    page.emulate_media(color_scheme="light")
    # The check-all box (the page's script) selects every row.
    page.goto(web + "/dead")
    page.locator("input.check-all").check()
    boxes = page.locator("#rows input[name=ref]")
    assert all(boxes.nth(i).is_checked() for i in range(boxes.count()))
    # "Delete every entry" asks first: dismissed, nothing goes; accepted, all go.
    everything = page.locator("form.actions").get_by_role("button", name="Delete")
    page.once("dialog", lambda dialog: dialog.dismiss())
    everything.click()
    assert sync_client.zcard(keys.dead) == 6
    page.once("dialog", lambda dialog: dialog.accept())
    everything.click()
    page.wait_for_selector(".note")
    assert "deleted 6" in page.locator(".note").inner_text()
    assert sync_client.zcard(keys.dead) == 0
