"""``locks delete-orphaned`` is linear and chunked: the jobs are read a bounded chunk
per call (twice), the orphans deleted a bounded chunk per call, owner-checked.
At scale (100k locks, 100k jobs): bench/orphan_locks.py."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import api
from cogworker_async.keys import Keys
from cogworker_async.payload import new_jid
from cogworker_async.unique import orphans
from tests.lua.support import make_job

pytestmark = pytest.mark.anyio

READ, DELETE = 50, 20


async def test_delete_orphaned_reads_and_deletes_in_bounded_chunks(
    redis: Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(orphans, "READ_CHUNK", READ)
    monkeypatch.setattr(orphans, "DELETE_CHUNK", DELETE)
    monkeypatch.setattr(api.locks, "DELETE_CHUNK", DELETE)
    queued = [make_job("mail", jid=new_jid()) for _ in range(400)]
    retrying = [make_job("mail", jid=new_jid()) for _ in range(300)]
    running = [make_job("mail", jid=new_jid()) for _ in range(120)]
    await redis.sadd(keys.queues, "mail")
    await redis.lpush(keys.queue("mail"), *queued)
    await redis.zadd(keys.retry, {raw: i for i, raw in enumerate(retrying)})
    await redis.sadd(keys.in_progress_identities, "p1")
    await redis.lpush(keys.in_progress("p1"), *running)
    live = {orjson.loads(raw)["jid"] for raw in (*queued, *retrying, *running)}
    gone = {new_jid() for _ in range(150)}
    for jid in (*live, *gone):
        await redis.set(keys.unique(f"j:{jid}"), jid, ex=600)

    calls: list[tuple[str, int, int]] = []  # (command, keys or args, entries replied)
    real = redis.execute_command

    async def recorded(*args: Any, **options: Any) -> Any:
        reply = await real(*args, **options)
        name = str(args[0]).upper()
        if name == "LRANGE":
            calls.append((name, 0, len(reply)))
        elif name in ("ZSCAN", "HSCAN"):
            calls.append((name, 0, len(reply[1])))
        elif name in ("EVALSHA", "EVAL"):
            calls.append((name, int(args[2]), len(reply)))
        return reply

    monkeypatch.setattr(redis, "execute_command", recorded)
    deleted = await api.delete_orphaned(redis, keys)

    assert {lock.holder for lock in deleted} == gone
    assert len(await api.list_locks(redis, keys)) == len(live)
    lranges = [n for name, _, n in calls if name == "LRANGE"]
    assert max(lranges) <= READ
    assert len(lranges) >= 2 * (400 + 120) // READ  # every list in chunks, in two passes
    assert max(n for name, _, n in calls if name == "ZSCAN") <= 2 * READ
    deletes = [k for name, k, _ in calls if name in ("EVALSHA", "EVAL")]
    assert max(deletes) <= DELETE
    assert sum(deletes) == len(gone)
