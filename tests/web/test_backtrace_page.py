"""The detail page of a retry or dead entry shows the backtrace a real failure kept."""

from __future__ import annotations

import html

import anyio
import pytest
from starlette.testclient import TestClient

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.keys import Keys
from tests.helpers import wait_for
from tests.web.test_pages import _tokens


@job(name="btpage.broken", retry=0)
async def broken(order: int) -> None:
    _charge(order)


@job(name="btpage.flaky", retry=3)
async def flaky(order: int) -> None:
    _charge(order)


def _charge(order: int) -> None:
    raise LookupError(f"no card on file for order {order} <b>")


def _fail_both(settings: Settings, keys: Keys) -> None:
    async def run() -> None:
        async with Client(settings) as client:
            await client.enqueue(broken, 7)
            await client.enqueue(flaky, 8)
            redis = client.redis

            async def filed() -> bool:
                return await redis.zcard(keys.dead) == 1 and await redis.zcard(keys.retry) == 1

            async with Worker(settings, jobs=[broken, flaky]):
                await wait_for(filed, timeout=20)

    anyio.run(run)


@pytest.mark.parametrize(("segment", "order"), [("dead", 7), ("retries", 8)])
def test_the_entry_page_shows_the_kept_backtrace(
    client: TestClient,
    settings: Settings,
    keys: Keys,
    segment: str,
    order: int,
) -> None:
    _fail_both(settings, keys)
    (token,) = _tokens(client, f"/{segment}")
    page = client.get(f"/{segment}/entry", params={"ref": token})
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert "<th>backtrace</th>" in page.text
    assert "Traceback (most recent call last):" in text
    assert f'File "{__file__}"' in text
    assert ", in _charge" in text
    assert f"LookupError: no card on file for order {order} <b>" in text
    assert "<b>" not in page.text.split("<th>backtrace</th>")[1].split("</pre>")[0]  # escaped
