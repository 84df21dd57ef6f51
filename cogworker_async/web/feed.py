"""The dashboard feed's queue rows: the queue table as the page's poll redraws it.

Each row carries the text to show and the link (built here, like the
template's, under the app's mount prefix) as plain strings: the page writes them
with ``textContent`` and ``setAttribute``, never as HTML, so a queue's name is
never markup.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse

from cogworker_async.api import QueueInfo
from cogworker_async.web.filters import duration, short, valid_queue
from cogworker_async.web.pages import segment, url

_HTML_SAFE = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


class FeedResponse(JSONResponse):
    """JSON with ``<``, ``>`` and ``&`` written as ``\\u`` escapes (the same JSON once
    parsed): a name like ``<script>`` is never markup in the body, even to a client
    that sniffs it as HTML."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content).decode().translate(_HTML_SAFE).encode()


def queue_rows(request: Request, queues: Iterable[QueueInfo]) -> list[dict[str, Any]]:
    """One row per queue, in the template's order: name, link (None for a name no
    page can show), size, latency as the table shows it, paused."""
    rows: list[dict[str, Any]] = []
    for queue in queues:
        linked = valid_queue(queue.name)
        rows.append(
            {
                "name": queue.name if linked else short(queue.name),
                "href": url(request, "/queues/" + segment(queue.name)) if linked else None,
                "size": queue.size,
                "latency": duration(queue.latency),
                "paused": queue.paused,
            }
        )
    return rows
