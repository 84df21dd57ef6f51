"""The pages: each a GET that reads a bounded amount and renders one template."""

from __future__ import annotations

import time
from typing import Any

from redis.exceptions import ResponseError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cogworker_async import api
from cogworker_async.settings import check_queue_name
from cogworker_async.store.faults import is_wrong_type
from cogworker_async.web import metrics, reads
from cogworker_async.web.app import redis_of, render, ui_of
from cogworker_async.web.charts import line_chart

SETS: dict[str, tuple[api.SetName, str]] = {
    "scheduled": ("schedule", "Scheduled"),
    "retries": ("retry", "Retries"),
    "dead": ("dead", "Dead"),
}
"""URL segment → (set, title)."""


def _page(request: Request) -> int:
    try:
        return max(1, int(request.query_params.get("page", "1")))
    except ValueError:
        return 1


async def dashboard(request: Request) -> Response:
    ui = ui_of(request)
    redis = redis_of(request)
    stats = await api.stats(redis, ui.keys)
    info = await reads.redis_info(redis)
    days = await reads.history(redis, ui.keys)
    chart = line_chart(
        [("processed", "processed", days.processed), ("failed", "failed", days.failed)],
        [days.days[0], days.days[-1]],
    )
    return render(request, "dashboard.html", stats=stats, info=info, chart=chart, page="dashboard")


async def stats_json(request: Request) -> Response:
    """The live chart's feed: totals now (the page computes the rates between polls)."""
    ui = ui_of(request)
    stats = await api.stats(redis_of(request), ui.keys)
    return JSONResponse(
        {
            "time": time.time(),
            "processed": stats.processed,
            "failed": stats.failed,
            "scheduled": stats.scheduled,
            "retry": stats.retry,
            "dead": stats.dead,
            "processes": stats.processes,
            "enqueued": sum(q.size for q in stats.queues),
        },
        headers={"cache-control": "no-store"},
    )


async def busy(request: Request) -> Response:
    ui = ui_of(request)
    redis = redis_of(request)
    procs = await api.processes(redis, ui.keys)
    jobs = await reads.busy_jobs(redis, ui.keys, procs)
    return render(request, "busy.html", processes=procs, jobs=jobs, page="busy")


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
    number = _page(request)
    window = await reads.queue_page(
        redis_of(request), ui.keys, name, page=number, oldest_first=order == "oldest"
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
        first_index=(number - 1) * reads.PAGE_SIZE,
        size=reads.PAGE_SIZE,
        paused=paused,
        page="queues",
    )


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
    number = _page(request)
    if needle:
        try:
            cursor = max(0, int(request.query_params.get("cursor", "0")))
        except ValueError:
            cursor = 0
        found = await reads.search_set(redis_of(request), ui.keys, which, needle, cursor=cursor)
    else:
        found = await reads.set_page(redis_of(request), ui.keys, which, page=number)
    context: dict[str, Any] = {
        "segment": segment,
        "which": which,
        "title": title,
        "found": found,
        "needle": needle,
        "number": number,
        "size": reads.PAGE_SIZE,
        "token": reads.ref_token,
        "page": which,
    }
    return render(request, "set.html", **context)


async def entry(request: Request) -> Response:
    ui = ui_of(request)
    segment, which, title = _set_of(request)
    token = request.query_params.get("ref", "")
    found = await reads.find_entries(redis_of(request), ui.keys, which, [token])
    context: dict[str, Any] = {"segment": segment, "which": which, "title": title, "page": which}
    if not found:
        problem = "no such entry: it was retried, deleted or moved since the page was drawn"
        return render(request, "error.html", status_code=404, problem=problem, **context)
    return render(request, "entry.html", e=found[0], token=token, **context)


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


LOCKS_SHOWN = 500  # a page, not the whole keyspace: `locks list` has them all


async def locks(request: Request) -> Response:
    ui = ui_of(request)
    found = await api.list_locks(redis_of(request), ui.keys)
    return render(
        request,
        "locks.html",
        locks=found[:LOCKS_SHOWN],
        more=len(found) > LOCKS_SHOWN,
        total=len(found),
        page="locks",
    )


METRICS_MINUTES = 60  # the default, as `stats --history`
# The page reads at most this many minutes: each is a hash with every job's
# counts and buckets, and 240 busy minutes of 50 job names took 560 ms to read
# and parse (60: 140 ms). `stats --history --minutes 240` has the rest.
METRICS_PAGE_MINUTES = 60
JOBS_SHOWN = 200


def _minutes(request: Request) -> int:
    """``?minutes=``, 1 to ``METRICS_PAGE_MINUTES`` (a non-number: the default)."""
    try:
        asked = int(request.query_params.get("minutes", METRICS_MINUTES))
    except ValueError:
        return METRICS_MINUTES
    return max(1, min(asked, METRICS_PAGE_MINUTES))


async def metrics_page(request: Request) -> Response:
    """Per minute processed/failed and per job name runs, failures, mean, p50/p95: read only."""
    ui = ui_of(request)
    minutes = _minutes(request)
    problem = None
    try:
        found = await api.history(redis_of(request), ui.keys, minutes=minutes, days=0)
    except ResponseError as exc:
        if not is_wrong_type(exc):
            raise
        found, problem = api.History([], []), str(exc)
    except (ValueError, TypeError, OverflowError) as exc:  # counts too odd to read
        found, problem = api.History([], []), f"metrics history unreadable: {exc}"
    points = found.minutes
    chart = line_chart(
        [
            ("processed", "processed", [m.processed for m in points]),
            ("failed", "failed", [m.failed for m in points]),
        ],
        [time.strftime("%H:%M", time.gmtime(m.at)) for m in points[:1] + points[-1:]] or ["", ""],
    )
    try:
        rows = metrics.job_rows(found)
    except (ValueError, TypeError, OverflowError) as exc:
        rows, problem = [], f"metrics history unreadable: {exc}"
    return render(
        request,
        "metrics.html",
        minutes=minutes,
        choices=[m for m in (15, 30, 60) if m <= METRICS_PAGE_MINUTES],
        kept=api.MAX_MINUTES,
        chart=chart,
        rows=rows[:JOBS_SHOWN],
        more=len(rows) > JOBS_SHOWN,
        total=len(rows),
        has_data=metrics.has_data(found),
        processed=sum(m.processed for m in points),
        failed=sum(m.failed for m in points),
        open_ended=metrics.open_ended,
        problem=problem,
        page="metrics",
    )


def routes() -> list[BaseRoute]:
    pages: list[BaseRoute] = [
        Route("/", dashboard),
        Route("/stats.json", stats_json),
        Route("/busy", busy),
        Route("/queues", queues),
        Route("/queues/{name}", queue),
        Route("/periodic", periodic),
        Route("/locks", locks),
        Route("/quarantine", quarantine),
        Route("/metrics", metrics_page),
    ]
    for segment in SETS:
        pages.append(Route(f"/{segment}", sorted_set))
        pages.append(Route(f"/{segment}/entry", entry))
    return pages
