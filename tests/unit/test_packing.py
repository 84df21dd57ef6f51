"""The hiredis packer sends the bytes redis-py would, and refuses what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from cogworker_async.settings import Settings
from cogworker_async.store.connection import HiredisPacking, connect


def _packed(connection: Any, *args: Any) -> bytes:
    return b"".join(bytes(part) for part in connection.pack_command(*args))


@pytest.fixture
def fast() -> Any:
    client = connect(Settings(redis_url="redis://127.0.0.1:1/0"))
    connection_class = client.connection_pool.connection_class
    assert issubclass(connection_class, HiredisPacking)
    return connection_class()


@pytest.mark.parametrize(
    "args",
    [
        ("EVALSHA", "a" * 40, 2, "k1", "k2", "reliable", 61, b'{"jid":"x"}', "é"),
        ("CONFIG GET", "maxmemory"),  # two words in the command name: two arguments
        (b"CLIENT SETNAME", "worker"),
        ("ZADD", "key", 1.5, "member", 86_400),
        ("SET", "k", b"x" * 10_000),  # past redis-py's chunking cut-off
    ],
)
def test_same_bytes_as_redis_py(fast: Any, args: tuple[Any, ...]) -> None:
    assert _packed(fast, *args) == _packed(Connection(), *args)


@pytest.mark.parametrize("bad", [None, True, object()])
def test_refused_values_raise_redis_py_error(fast: Any, bad: Any) -> None:
    with pytest.raises(DataError):
        fast.pack_command("SET", "k", bad)
