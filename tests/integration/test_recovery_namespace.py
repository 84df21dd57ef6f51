"""The first recovery pass reads only the namespace (issue 26 §1): on a Redis shared
with many foreign keys it sends no SCAN (nor KEYS), a handful of commands whatever
the keyspace holds, and still finds an identity only a beat stamp names."""

from __future__ import annotations

import logging

import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.worker.heartbeat import Heartbeat
from cogworker_async.worker.recovery import Recovery
from tests.lua.support import make_job, redis_now

pytestmark = pytest.mark.anyio

LOG = logging.getLogger("test.recovery_namespace")
FOREIGN = 20_000
KEYSPACE_WALKS = ("scan", "keys", "randomkey")


async def _calls(redis: Redis) -> dict[str, int]:
    """Calls per command since the server started (INFO commandstats)."""
    stats = await redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


async def test_the_first_pass_reads_no_foreign_key(
    redis: Redis, keys: Keys, settings: Settings
) -> None:
    async with redis.pipeline(transaction=False) as pipe:
        for i in range(FOREIGN):
            pipe.set(f"someone-else:{keys.ns}:{i}", "x")
        await pipe.execute()
    judge = "judge:1"
    heartbeat = Heartbeat(
        settings,
        keys,
        identity=judge,
        queues=["default"],
        reliable=lambda: True,
        busy=dict,
        logger=LOG,
    )
    try:
        heartbeat.beat_once()
        now = await redis_now(redis)
        # The judge has beaten without a break long enough (planted, as in test_judge).
        await redis.hset(keys.beating_since, judge, f"{now - 100:.6f}")
        # A dead process whose registries were lost (moved aside by the key guard):
        # only its last-beat stamp still names it.
        lost = "lost:1"
        job = make_job("default")
        await redis.lpush(keys.in_progress(lost), job)
        await redis.hset(keys.last_beat, lost, f"{now - 100:.6f}")

        before = await _calls(redis)
        moved = await Recovery(redis, keys, settings, identity=judge, logger=LOG).pass_once()
        after = await _calls(redis)
    finally:
        heartbeat.close()
        async with redis.pipeline(transaction=False) as pipe:
            for i in range(FOREIGN):
                pipe.delete(f"someone-else:{keys.ns}:{i}")
            await pipe.execute()

    assert moved == 1
    assert await redis.lrange(keys.queue("default"), 0, -1) == [job]  # type: ignore[misc]
    walked = {name: after.get(name, 0) - before.get(name, 0) for name in KEYSPACE_WALKS}
    assert walked == dict.fromkeys(KEYSPACE_WALKS, 0)
    # The pass's own commands, those its scripts call included (the lease, overdue,
    # the registries, the requeue, the burial and unsettled checks, our INFO): 39
    # when written; bounded whatever the keyspace holds (a walk of these 20,000
    # keys would be 40 SCANs alone).
    sent = sum(after.values()) - sum(before.values())
    assert sent < 100, {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k)}
