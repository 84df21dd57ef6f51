"""The overview pages: the dashboard (and its stats feed), who is busy, the queues."""

from __future__ import annotations

import time

import orjson
from redis.exceptions import ResponseError
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from cogworker_async import api
from cogworker_async.api import browsing
from cogworker_async.settings import check_queue_name
from cogworker_async.web import feed, params
from cogworker_async.web.pages import redis_of, render, ui_of


async def dashboard(request: Request) -> Response:
    if request.method == "HEAD":
        # A monitor's or a link preview's probe: the page's headers, none of its
        # reads (the full page reads stats, INFO, 14 days and every process).
        return HTMLResponse(b"")
    ui = ui_of(request)
    redis = redis_of(request)
    stats = await api.stats(redis, ui.keys)
    procs = await api.processes(redis, ui.keys)
    info = await browsing.redis_info(redis)
    days = await browsing.history(redis, ui.keys)
    per_day = {"days": days.days, "processed": days.processed, "failed": days.failed}
    return render(
        request,
        "dashboard.html",
        stats=stats,
        busy=browsing.busy_count(procs),
        info=info,
        days=days,
        per_day=orjson.dumps(per_day).decode(),
        page="dashboard",
    )


async def stats_json(request: Request) -> Response:
    """The live charts' feed: totals now (the page computes the rates between polls)
    and today's counters (the per-day chart's last point)."""
    ui = ui_of(request)
    redis = redis_of(request)
    stats = await api.stats(redis, ui.keys)
    procs = await api.processes(redis, ui.keys)
    today = await browsing.history(redis, ui.keys, days=1)
    return feed.FeedResponse(
        {
            "time": time.time(),
            "processed": stats.processed,
            "failed": stats.failed,
            "scheduled": stats.scheduled,
            "retry": stats.retry,
            "dead": stats.dead,
            "processes": stats.processes,
            "busy": browsing.busy_count(procs),
            "enqueued": sum(q.size for q in stats.queues),
            "queues": feed.queue_rows(request, stats.queues),
            "today": {
                "day": today.days[-1],
                "processed": today.processed[-1],
                "failed": today.failed[-1],
            },
        },
    )


async def busy(request: Request) -> Response:
    ui = ui_of(request)
    redis = redis_of(request)
    procs = await api.processes(redis, ui.keys)
    jobs = await browsing.busy_jobs(redis, ui.keys, procs)
    # What the running jobs reported (current_job().progress): one round trip.
    progress = await api.progress_of(redis, ui.keys, [j.jid for j in jobs if j.jid])
    return render(request, "busy.html", processes=procs, jobs=jobs, progress=progress, page="busy")


async def queues(request: Request) -> Response:
    ui = ui_of(request)
    found = await api.queues(redis_of(request), ui.keys)
    return render(request, "queues.html", queues=found, page="queues")


async def queue(request: Request) -> Response:
    ui = ui_of(request)
    name = request.path_params["name"]
    try:
        check_queue_name(name)
    except ValueError as exc:
        return render(request, "error.html", status_code=404, problem=str(exc), page="queues")
    order = "oldest" if request.query_params.get("order") == "oldest" else "newest"
    number = params.page_number(request)
    size = params.page_size(request)
    window = await browsing.queue_page(
        redis_of(request), ui.keys, name, page=number, oldest_first=order == "oldest", size=size
    )
    try:
        paused = bool(await redis_of(request).sismember(ui.keys.paused, name))
    except ResponseError:  # a wrong-typed paused set: shown as not paused, as api.queues does
        paused = False
    return render(
        request,
        "queue.html",
        name=name,
        window=window,
        order=order,
        number=number,
        first_index=(number - 1) * size,
        size=size,
        sizes=params.PAGE_SIZES,
        size_arg=None if size == params.DEFAULT_PAGE_SIZE else size,
        paused=paused,
        page="queues",
    )
