"""The queue page at a phone's width (issue 25 §6): with the widest things a queue page
shows (a 255-character queue name, long job names and arguments, many rows, the
pager), the document is no wider than the 375 px viewport; what is wider
scrolls inside the table's own box."""

from __future__ import annotations

from typing import Any

import redis as sync_redis

from cogworker_async.keys import Keys
from tests.browser.conftest import shoot
from tests.lua.support import make_job

PHONE = {"width": 375, "height": 800}
LONG_QUEUE = "q" * 255  # MAX_QUEUE_NAME: the longest name a worker accepts


def test_the_queue_page_fits_375_px(
    browser: Any, web: str, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    name = f"reports.{'monthly_' * 12}build"  # a long class name, no space to break at
    for queue in ("mail", LONG_QUEUE):
        jobs = [
            make_job(queue, args=["x" * 300, {"k": "v" * 200}], **{"class": name})
            for _ in range(60)
        ]
        sync_client.sadd(keys.queues, queue)
        sync_client.lpush(keys.queue(queue), *jobs)
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    try:
        for name, path in (
            ("queue-375", "/queues/mail"),
            ("queue-long-375", f"/queues/{LONG_QUEUE}"),
        ):
            answer = page.goto(web + path)
            assert answer is not None
            assert answer.status == 200, path
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], (path, width)
            # Every row is there, in a table whose own box fits the screen (what does
            # not fit scrolls inside it).
            table = page.locator("main table")
            assert table.locator("tbody tr").count() >= 25
            assert table.evaluate("t => t.getBoundingClientRect().right") <= PHONE["width"]
            shoot(page, name)
    finally:
        context.close()
