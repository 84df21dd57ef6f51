"""A real 3-primary Redis Cluster for the session, and settings on a hash-tagged namespace."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from cogworker_async.settings import Settings
from tests.conftest import FAST
from tests.servers import Cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    nodes = Cluster(3)
    yield nodes
    nodes.stop()


@pytest.fixture
def namespace() -> str:
    return f"{{t{uuid.uuid4().hex[:10]}}}"


@pytest.fixture
def settings(cluster: Cluster, namespace: str) -> Settings:
    return Settings(redis_url=cluster.url, namespace=namespace, concurrency=10, **FAST)
