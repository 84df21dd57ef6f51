"""periodic_claim.lua: one claim per (entry, definition, slot), the push in the same
step, the last slot only moving forward."""

from __future__ import annotations

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.scripts import script
from tests.lua.support import jid_of, make_job

pytestmark = pytest.mark.anyio


async def claim(redis: Redis, keys: Keys, slot: int, ttl_ms: int = 60_000) -> int:
    return int(
        await script("periodic_claim").run(
            redis,
            [
                keys.periodic(f"claim:tick:abc:{slot}"),
                keys.periodic("last"),
                keys.queue("default"),
                keys.queues,
                keys.wakeup("default"),
            ],
            [ttl_ms, "tick", slot, "default", make_job(jid=f"{slot:024x}")],
        )
    )


async def test_concurrent_claims_of_one_slot_push_one_job(redis: Redis, keys: Keys) -> None:
    results: list[int] = []

    async def one() -> None:
        results.append(await claim(redis, keys, 100))

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(one)
    assert sorted(results) == [0] * 19 + [1]
    queued = await redis.lrange(keys.queue("default"), 0, -1)  # type: ignore[misc]
    assert [jid_of(raw) for raw in queued] == [f"{100:024x}"]
    assert await redis.sismember(keys.queues, "default")  # type: ignore[misc]
    assert await redis.zcard(keys.wakeup("default")) == 1
    ttl = await redis.pttl(keys.periodic("claim:tick:abc:100"))
    assert 0 < ttl <= 60_000


async def test_last_slot_only_moves_forward(redis: Redis, keys: Keys) -> None:
    assert await claim(redis, keys, 200) == 1
    assert await claim(redis, keys, 190) == 1  # a late claim of an older slot
    assert await redis.hget(keys.periodic("last"), "tick") == b"200"  # type: ignore[misc]
    assert await claim(redis, keys, 210) == 1
    assert await redis.hget(keys.periodic("last"), "tick") == b"210"  # type: ignore[misc]
