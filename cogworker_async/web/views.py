"""The pages: each a GET that reads a bounded amount and renders one template."""

from __future__ import annotations

import time
from typing import Any

import orjson
from redis.exceptions import ResponseError
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from cogworker_async import api
from cogworker_async.settings import check_queue_name
from cogworker_async.store.faults import is_wrong_type
from cogworker_async.web import feed, metrics, params, reads
from cogworker_async.web.charts import line_chart
from cogworker_async.web.pages import redis_of, render, ui_of

SETS: dict[str, tuple[api.SetName, str]] = {
    "scheduled": ("schedule", "Scheduled"),
    "retries": ("retry", "Retries"),
    "dead": ("dead", "Dead"),
}
"""URL segment → (set, title)."""


async def dashboard(request: Request) -> Response:
    if request.method == "HEAD":
        # A monitor's or a link preview's probe: the page's headers, none of its
        # reads (the full page reads stats, INFO, 14 days and every process).
        return HTMLResponse(b"")
    ui = ui_of(request)
    redis = redis_of(request)
    stats = await api.stats(redis, ui.keys)
    procs = await api.processes(redis, ui.keys)
    info = await reads.redis_info(redis)
    days = await reads.history(redis, ui.keys)
    per_day = {"days": days.days, "processed": days.processed, "failed": days.failed}
    return render(
        request,
        "dashboard.html",
        stats=stats,
        busy=reads.busy_count(procs),
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
    today = await reads.history(redis, ui.keys, days=1)
    return feed.FeedResponse(
        {
            "time": time.time(),
            "processed": stats.processed,
            "failed": stats.failed,
            "scheduled": stats.scheduled,
            "retry": stats.retry,
            "dead": stats.dead,
            "processes": stats.processes,
            "busy": reads.busy_count(procs),
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
    jobs = await reads.busy_jobs(redis, ui.keys, procs)
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
    window = await reads.queue_page(
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
        found = await reads.search_set(redis_of(request), ui.keys, which, needle, cursor=cursor)
    else:
        found = await reads.set_page(redis_of(request), ui.keys, which, page=number, size=size)
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
        "token": reads.ref_token,
        "page": which,
    }
    return render(request, "set.html", **context)


async def entry(request: Request) -> Response:
    ui = ui_of(request)
    segment, which, title = _set_of(request)
    token = request.query_params.get("ref", "")
    named = params.entry_ref(token)
    found = await reads.find_entries(redis_of(request), ui.keys, which, [named])
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


METRICS_MINUTES = 60  # the default, as `stats --history`
# Up to every minute kept: settled minutes come parsed from the app's cache
# (web/minute_cache.py), so 240 busy minutes of 50 job names cost a read of the
# newest few, not the 490 ms a full read and parse takes.
METRICS_PAGE_MINUTES = api.MAX_MINUTES
METRICS_CHOICES = (15, 30, 60, 120, 240)
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
        found = await ui.minutes.history(redis_of(request), ui.keys, minutes=minutes)
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
    series = {
        "x": [m.minute * 60 for m in points],
        "series": [
            {"label": "processed", "css": "processed", "values": [m.processed for m in points]},
            {"label": "failed", "css": "failed", "values": [m.failed for m in points]},
        ],
    }
    try:
        rows = metrics.job_rows(found)
    except (ValueError, TypeError, OverflowError) as exc:
        rows, problem = [], f"metrics history unreadable: {exc}"
    return render(
        request,
        "metrics.html",
        minutes=minutes,
        choices=[m for m in METRICS_CHOICES if m <= METRICS_PAGE_MINUTES],
        kept=api.MAX_MINUTES,
        chart=chart,
        series=orjson.dumps(series).decode(),
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


async def job_metrics_page(request: Request) -> Response:
    """One job name's runs and failures per minute, its totals and duration buckets."""
    ui = ui_of(request)
    name = request.query_params.get("name", "")
    minutes = _minutes(request)
    found = await ui.minutes.history(redis_of(request), ui.keys, minutes=minutes)
    per_minute = [(m.minute * 60, m.jobs.get(name)) for m in found.minutes]
    succeeded = [j.runs - j.failures if j else 0 for _, j in per_minute]
    failures = [j.failures if j else 0 for _, j in per_minute]
    series = {
        "x": [at for at, _ in per_minute],
        "series": [
            {"label": "succeeded", "css": "processed", "values": succeeded},
            {"label": "failed", "css": "failed", "values": failures},
        ],
    }
    rows = [r for r in metrics.job_rows(found) if r.name == name]
    summary = found.jobs().get(name)
    buckets = metrics.bucket_rows(summary.histogram if summary else ())
    return render(
        request,
        "job_metrics.html",
        name=name,
        minutes=minutes,
        choices=[m for m in METRICS_CHOICES if m <= METRICS_PAGE_MINUTES],
        row=rows[0] if rows else None,
        buckets=buckets,
        series=orjson.dumps(series).decode(),
        open_ended=metrics.open_ended,
        page="metrics",
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
        token=reads.ref_token,
        page="",
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
        Route("/limits", limits),
        Route("/batches", batches),
        Route("/batches/{bid}", batch),
        Route("/quarantine", quarantine),
        Route("/metrics", metrics_page),
        Route("/metrics/job", job_metrics_page),
        Route("/jobs", job_lookup),
    ]
    for segment in SETS:
        pages.append(Route(f"/{segment}", sorted_set))
        pages.append(Route(f"/{segment}/entry", entry))
    return pages
