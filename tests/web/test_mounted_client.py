"""A UI mounted in a FastAPI app, whose lifespan never reaches a mounted app (issue 25
§6): the first request makes the shared client, later ones reuse it (no connection
per page or poll), and it is closed with the event loop, leaving nothing open."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis as sync_redis
from fastapi import FastAPI
from starlette.testclient import TestClient

from cogworker_async.settings import Settings
from cogworker_async.web import create_app


def _connections(sync_client: sync_redis.Redis) -> tuple[int, int]:
    """(connections now open, connections ever accepted) by the test server."""
    clients = sync_client.info("clients")["connected_clients"]
    received = sync_client.info("stats")["total_connections_received"]
    return int(clients), int(received)


def _host(settings: Settings) -> FastAPI:
    host = FastAPI()

    @host.get("/")
    async def home() -> dict[str, str]:
        return {"app": "host"}

    host.mount("/jobs", create_app(settings, allowed_hosts=["testserver"]))
    return host


def test_a_mounted_ui_shares_one_client_and_closes_it_with_the_loop(
    settings: Settings, sync_client: sync_redis.Redis
) -> None:
    open_before, received_before = _connections(sync_client)
    with TestClient(_host(settings)) as client:  # the host's lifespan, not the UI's
        assert client.get("/").json() == {"app": "host"}
        for path in ("/jobs/", "/jobs/queues", "/jobs/stats.json", "/jobs/periodic") * 5:
            assert client.get(path).status_code == 200, path
        open_during, received_during = _connections(sync_client)
        # Twenty pages over one pooled connection (a connection per page before).
        assert received_during - received_before <= 2
        assert open_during - open_before <= 2
    gc.collect()  # an unclosed connection would warn here (warnings are errors)
    open_after, received_after = _connections(sync_client)
    assert open_after == open_before  # closed with the test client's event loop
    assert received_after == received_during


def test_a_loop_per_request_still_works_and_leaks_nothing(
    settings: Settings, sync_client: sync_redis.Redis
) -> None:
    """Starlette's test client without ``with`` runs each request on a new event loop:
    each loop's client is closed as that loop ends."""
    open_before, _ = _connections(sync_client)
    client = TestClient(_host(settings))
    for path in ("/jobs/", "/jobs/queues", "/jobs/busy"):
        assert client.get(path).status_code == 200, path
    gc.collect()
    assert _connections(sync_client)[0] == open_before


def test_a_host_that_runs_the_uis_lifespan_uses_its_client(
    settings: Settings, sync_client: sync_redis.Redis
) -> None:
    ui = create_app(settings, allowed_hosts=["testserver"])

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with ui.router.lifespan_context(ui):
            yield

    host = FastAPI(lifespan=lifespan)
    host.mount("/jobs", ui)
    open_before, received_before = _connections(sync_client)
    with TestClient(host) as client:
        for _ in range(10):
            assert client.get("/jobs/queues").status_code == 200
        assert _connections(sync_client)[1] - received_before <= 2
    gc.collect()
    assert _connections(sync_client)[0] == open_before
