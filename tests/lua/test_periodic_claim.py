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
                keys.periodic("running:tick"),
            ],
            [ttl_ms, "tick", slot, "default", make_job(jid=f"{slot:024x}"), "", f"{slot:024x}"],
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


async def test_overlap_false_claim_skips_while_the_lock_is_held(redis: Redis, keys: Keys) -> None:
    async def locked_claim(slot: int) -> object:
        jid = f"{slot:024x}"
        return await script("periodic_claim").run(
            redis,
            [
                keys.periodic(f"claim:tick:abc:{slot}"),
                keys.periodic("last"),
                keys.queue("default"),
                keys.queues,
                keys.wakeup("default"),
                keys.periodic("running:tick"),
            ],
            [60_000, "tick", slot, "default", make_job(jid=jid), 30_000, jid],
        )

    running = script("periodic_running")
    lock = [keys.periodic("running:tick")]
    assert await locked_claim(1) == 1
    assert await locked_claim(2) == f"{1:024x}".encode()  # skipped: the holder is named
    assert await locked_claim(2) == 0  # and decided: nobody else claims that slot
    assert await running.run(redis, lock, [f"{9:024x}", ""]) == 0  # not the holder's jid
    assert await running.run(redis, lock, [f"{1:024x}", ""]) == 1  # the holder releases
    assert await locked_claim(3) == 1
    assert await redis.llen(keys.queue("default")) == 2  # type: ignore[misc]
    await redis.delete(lock[0])
    # A run whose lock expired while it waited takes it again when it starts.
    assert await running.run(redis, lock, [f"{3:024x}", 30_000]) == 1
    assert await redis.get(lock[0]) == f"{3:024x}".encode()
