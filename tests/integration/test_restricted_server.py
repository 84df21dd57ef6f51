"""A Redis user whose ACL refuses the optional commands (INFO, CONFIG, CLIENT) runs a worker."""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest
import redis as sync_redis

from cogworker_async import Client, Settings, Worker, api, job
from cogworker_async.keys import Keys
from tests.helpers import wait_for
from tests.integration.test_cli import cli

pytestmark = pytest.mark.anyio

ran: list[int] = []


@job(name="restricted.record")
async def record(i: int) -> None:
    ran.append(i)


@pytest.fixture
def limited_settings(settings: Settings, sync_client: sync_redis.Redis) -> Iterator[Settings]:
    """The test settings, as a user who may run everything but INFO, CONFIG and CLIENT."""
    user = f"limited{uuid.uuid4().hex[:8]}"
    sync_client.execute_command(
        "ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", "-info", "-config", "-client"
    )
    parts = urlsplit(settings.redis_url)
    netloc = f"{user}:pw@{parts.hostname}:{parts.port}"
    url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    try:
        yield settings.model_copy(update={"redis_url": url})
    finally:
        sync_client.execute_command("ACL", "DELUSER", user)


async def test_a_user_refused_info_config_and_client_runs_a_worker_and_the_cli(
    limited_settings: Settings, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    ran.clear()
    # The user really is refused: INFO fails for it.
    probe = sync_redis.Redis.from_url(limited_settings.redis_url)
    with pytest.raises(sync_redis.exceptions.NoPermissionError):
        probe.info("server")
    probe.close()
    caplog.set_level(logging.INFO, logger="cogworker_async")
    worker = Worker(limited_settings, jobs=[record])
    async with Client(limited_settings) as client:
        async with worker:
            await client.enqueue(record, 1)
            await wait_for(lambda: _ran(1))
        await wait_for(lambda: _processed(client, keys, 1))
    assert ran == [1]
    refused = [r for r in caplog.records if "refused INFO" in r.getMessage()]
    assert len(refused) == 1
    assert "reliable fetch" in refused[0].getMessage()
    # The operators' commands work for the same user.
    for command in (["stats", "--json"], ["queues"], ["processes"], ["retry", "list"]):
        done = await anyio.to_thread.run_sync(functools.partial(cli, limited_settings, *command))
        assert done.returncode == 0, (command, done.stderr)
        assert "Traceback" not in done.stderr


async def _processed(client: Client, keys: Keys, n: int) -> bool:
    return (await api.stats(client.redis, keys)).processed >= n


async def _ran(n: int) -> bool:
    return len(ran) >= n
