"""``cogworker-async check``: exit 0 only while a worker process on this host is alive."""

from __future__ import annotations

import socket

import anyio
import orjson
import pytest
import redis as sync_redis

from cogworker_async import Settings, Worker
from cogworker_async.keys import Keys
from tests.integration.test_cli import cli


def fake_presence(client: sync_redis.Redis, keys: Keys, identity: str, hostname: str) -> None:
    client.set(keys.process(identity), orjson.dumps({"hostname": hostname, "pid": 1}), ex=60)
    client.sadd(keys.processes, identity)


def test_no_process_is_exit_1(settings: Settings) -> None:
    done = cli(settings, "check")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: no live worker process on {socket.gethostname()} (0 live on other hosts)"
    ]


def test_only_other_hosts_or_gone_processes_is_exit_1(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    fake_presence(sync_client, keys, "elsewhere:1:aa", "some-other-host")
    sync_client.sadd(keys.processes, f"{socket.gethostname()}:2:bb")  # listed, presence gone
    done = cli(settings, "check")
    assert done.returncode == 1
    assert "(1 live on other hosts)" in done.stderr


def test_a_live_process_here_is_exit_0(
    settings: Settings, sync_client: sync_redis.Redis, keys: Keys
) -> None:
    fake_presence(sync_client, keys, "here:1:cc", socket.gethostname())
    done = cli(settings, "check")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ok: 1 live worker process(es) on {socket.gethostname()}"


@pytest.mark.anyio
async def test_a_running_worker_passes_then_fails_once_stopped(settings: Settings) -> None:
    async with Worker(settings):
        running = await anyio.to_thread.run_sync(cli, settings, "check")
    assert running.returncode == 0, running.stderr
    stopped = await anyio.to_thread.run_sync(cli, settings, "check")
    assert stopped.returncode == 1


def test_unreachable_redis_is_exit_1(settings: Settings) -> None:
    down = cli(settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}), "check")
    assert down.returncode == 1
    assert "cannot reach Redis at redis://127.0.0.1:1/0" in down.stderr
    assert "Traceback" not in down.stderr
