"""The pages of what jobs hold or are held by: periodic entries, the quarantine,
locks, limits, batches."""

from __future__ import annotations

from typing import Any

from redis.exceptions import ResponseError
from starlette.requests import Request
from starlette.responses import Response

from cogworker_async import api
from cogworker_async.store.faults import is_wrong_type
from cogworker_async.web.pages import redis_of, render, ui_of


async def periodic(request: Request) -> Response:
    ui = ui_of(request)
    problem = None
    try:
        entries = await api.periodic_entries(redis_of(request), ui.keys)
    except (ValueError, KeyError, TypeError) as exc:  # a published definition we can't read
        entries, problem = [], f"periodic entries unreadable: {exc}"
    except ResponseError as exc:
        if not is_wrong_type(exc):
            raise
        entries, problem = [], str(exc)
    return render(request, "periodic.html", entries=entries, problem=problem, page="periodic")


async def quarantine(request: Request) -> Response:
    ui = ui_of(request)
    found = await api.quarantine_list(redis_of(request), ui.keys)
    return render(request, "quarantine.html", keys=found, page="quarantine")


async def locks(request: Request) -> Response:
    """One page of locks (``api.LOCKS_PAGE``, by SCAN cursor): a load reads its own
    page, not every lock (`locks list` has them all)."""
    ui = ui_of(request)
    try:
        cursor = max(0, int(request.query_params.get("cursor", "0")))
    except ValueError:
        cursor = 0
    found = await api.list_locks_page(redis_of(request), ui.keys, cursor=cursor)
    return render(
        request,
        "locks.html",
        locks=found.locks,
        next_cursor=found.cursor,
        first=cursor == 0,
        page="locks",
    )


LIMITS_SHOWN = 500  # keys a page shows (`limits list` has them all)


async def limits(request: Request) -> Response:
    """The limit keys in use: running, held, run-time limit, pause left."""
    ui = ui_of(request)
    rows = await api.list_limits(redis_of(request), ui.keys)
    return render(
        request,
        "limits.html",
        rows=rows[:LIMITS_SHOWN],
        more=len(rows) - LIMITS_SHOWN,
        page="limits",
    )


BATCHES_SHOWN = 50  # the newest, as `batches list`


def _done_share(batch: dict[str, Any]) -> float:
    total = batch["total"]
    ended = batch["succeeded"] + batch["failed"] + batch["dead"]
    return min(1.0, ended / total) if total else (1.0 if batch["pending"] == 0 else 0.0)


async def batches(request: Request) -> Response:
    """The newest batches: state, a progress bar, counts, callbacks."""
    ui = ui_of(request)
    found = await api.list_batches(redis_of(request), ui.keys, BATCHES_SHOWN)
    for batch in found:
        batch["done_share"] = _done_share(batch)
    return render(request, "batches.html", batches=found, batch=None, page="batches")


async def batch(request: Request) -> Response:
    """One batch: its counts, callbacks and the members still pending."""
    ui = ui_of(request)
    bid = request.path_params["bid"]
    found = await api.show_batch(redis_of(request), ui.keys, bid)
    if found is None:
        return render(
            request, "error.html", status_code=404, problem=f"no batch {bid}", page="batches"
        )
    found["done_share"] = _done_share(found)
    return render(request, "batches.html", batches=[found], batch=found, page="batches")
