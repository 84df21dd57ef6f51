"""The pages: each a GET that reads a bounded amount and renders one template.

One module per page group (``overview``, ``sets``, ``holdings``,
``metrics_pages``); ``routes`` gathers them for the app."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from cogworker_async.web.views.holdings import batch, batches, limits, locks, periodic, quarantine
from cogworker_async.web.views.metrics_pages import job_metrics_page, metrics_page
from cogworker_async.web.views.overview import busy, dashboard, queue, queues, stats_json
from cogworker_async.web.views.sets import SETS, entry, job_lookup, sorted_set

__all__ = ["SETS", "routes"]


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
