"""Shared fixtures: one real redis-server per test session, a fresh namespace per test."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import redis as sync_redis
from redis.asyncio import Redis

from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings

# tests/cluster and tests/sentinel start several servers each: `make test-cluster` and
# `make test-sentinel` run them (with this variable set), `make test` does not.
collect_ignore = [] if os.environ.get("COGWORKER_TEST_TOPOLOGIES") else ["cluster", "sentinel"]

# A one-node cluster serving one slot, every namespace tagged into it: the server
# refuses any key outside that slot, in a script or not (tests/cluster/test_script_slots.py).
ONE_NODE_CLUSTER = os.environ.get("COGWORKER_TEST_ONE_NODE_CLUSTER") == "1"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """A throwaway redis-server on a free port (never the shared 6379)."""
    if ONE_NODE_CLUSTER:
        from tests.servers import one_node_cluster

        server = one_node_cluster()
    else:
        server = EmbeddedRedis()
        server.start()
    yield server
    server.stop()


@pytest.fixture
def namespace() -> str:
    return f"{{cw}}t{uuid.uuid4().hex[:10]}" if ONE_NODE_CLUSTER else f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def keys(namespace: str) -> Keys:
    return Keys(namespace)


FAST: dict[str, Any] = {
    "heartbeat_interval": 0.5,
    "heartbeat_ttl": 2.0,
    # heartbeat_ttl + 2 x heartbeat_interval + 0.5 s: the least the judge rule allows.
    "orphan_threshold": 3.5,
    "orphan_check_interval": 1.0,
    "fetch_idle_max_interval": 0.5,
    "scheduled_poll_interval": 0.5,
    "shutdown_timeout": 2.0,
    "socket_timeout": 5.0,
}


@pytest.fixture
def settings(redis_server: EmbeddedRedis, namespace: str) -> Settings:
    """Settings against the test server with every interval small enough to test in seconds."""
    return Settings(redis_url=redis_server.url, namespace=namespace, concurrency=10, **FAST)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def redis(redis_server: EmbeddedRedis) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


@pytest.fixture
def sync_client(redis_server: EmbeddedRedis) -> Iterator[sync_redis.Redis]:
    client = sync_redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


def child_env(settings: Settings, **extra: str) -> dict[str, str]:
    """Environment for a subprocess worker using these settings."""
    env = dict(os.environ)
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        text = ",".join(value) if isinstance(value, tuple) else str(value)
        env[f"COGWORKER_{name.upper()}"] = text
    env.update(extra)
    return env


ROOT = Path(__file__).resolve().parents[1]


def spawn_worker_command(settings: Settings, log: IO[bytes], *args: str) -> subprocess.Popen[bytes]:
    """``cogworker-async worker tests.jobs_for_tests ARGS...`` as a user runs it, output to ``log``.

    A file, never a pipe: a pipe nobody reads could fill and block the worker.
    """
    return subprocess.Popen(
        [sys.executable, "-m", "cogworker_async", "worker", "tests.jobs_for_tests", *args],
        cwd=ROOT,
        env=child_env(settings),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
