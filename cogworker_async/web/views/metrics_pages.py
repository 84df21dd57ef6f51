"""The metrics pages: every job's counts over the last minutes, and one job's."""

from __future__ import annotations

import time

import orjson
from redis.exceptions import ResponseError
from starlette.requests import Request
from starlette.responses import Response

from cogworker_async import api
from cogworker_async.store.faults import is_wrong_type
from cogworker_async.web import metrics
from cogworker_async.web.charts import line_chart
from cogworker_async.web.pages import redis_of, render, ui_of

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
