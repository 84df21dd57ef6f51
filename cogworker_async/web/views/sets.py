"""The pages of the sorted sets (scheduled, retries, dead), one entry, and a job
looked up by jid."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from cogworker_async import api
from cogworker_async.api import browsing
from cogworker_async.web import params
from cogworker_async.web.pages import redis_of, render, ui_of

SETS: dict[str, tuple[api.SetName, str]] = {
    "scheduled": ("schedule", "Scheduled"),
    "retries": ("retry", "Retries"),
    "dead": ("dead", "Dead"),
}
"""URL segment → (set, title)."""


def _set_of(request: Request) -> tuple[str, api.SetName, str]:
    segment = request.url.path.rstrip("/").split("/")[-1]
    if segment == "entry":
        segment = request.url.path.rstrip("/").split("/")[-2]
    which, title = SETS[segment]
    return segment, which, title


async def sorted_set(request: Request) -> Response:
    ui = ui_of(request)
    segment, which, title = _set_of(request)
    needle = request.query_params.get("q", "").strip()
    number = params.page_number(request)
    size = params.page_size(request)
    if needle:
        cursor = params.cursor(request)
        found = await browsing.search_set(redis_of(request), ui.keys, which, needle, cursor=cursor)
    else:
        found = await browsing.set_page(redis_of(request), ui.keys, which, page=number, size=size)
    context: dict[str, Any] = {
        "segment": segment,
        "which": which,
        "title": title,
        "found": found,
        "needle": needle,
        "number": number,
        "size": size,
        "sizes": params.PAGE_SIZES,
        "size_arg": None if size == params.DEFAULT_PAGE_SIZE else size,
        "token": browsing.ref_token,
        "page": which,
    }
    return render(request, "set.html", **context)


async def entry(request: Request) -> Response:
    ui = ui_of(request)
    segment, which, title = _set_of(request)
    token = request.query_params.get("ref", "")
    named = params.entry_ref(token)
    found = await browsing.find_entries(redis_of(request), ui.keys, which, [named])
    context: dict[str, Any] = {"segment": segment, "which": which, "title": title, "page": which}
    if not found:
        problem = "no such entry: it was retried, deleted or moved since the page was drawn"
        return render(request, "error.html", status_code=404, problem=problem, **context)
    kept, expired = (None, False)
    if found[0].jid:
        kept, expired = await api.kept_result(redis_of(request), ui.keys, found[0].jid)
    return render(
        request, "entry.html", e=found[0], token=token, kept=kept, expired=expired, **context
    )


async def job_lookup(request: Request) -> Response:
    """``?jid=``: where that job is now (a bounded look everywhere), and its kept result."""
    ui = ui_of(request)
    jid = request.query_params.get("jid", "").strip()
    if not jid:
        return render(request, "job.html", jid="", lookup=None, page="")
    try:
        api.check_jid(jid)
    except ValueError as exc:
        return render(request, "error.html", status_code=400, problem=str(exc), page="")
    lookup = await api.locate(redis_of(request), ui.keys, jid)
    segments = {which: segment for segment, (which, _) in SETS.items()}
    return render(
        request,
        "job.html",
        jid=jid,
        lookup=lookup,
        segments=segments,
        token=browsing.ref_token,
        page="",
    )
