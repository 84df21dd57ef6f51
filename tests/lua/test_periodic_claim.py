"""periodic_claim.lua (through ``store.periodic.claim_slots``): one claim per (entry,
slot), the push in the same step, the last slot only moving forward, a catch-up
claim only past the last slot, and a wrong-typed key reported before anything
is written."""

from __future__ import annotations

import anyio
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store.periodic import ClaimOutcome, SlotClaim, claim_slots, set_aside_last
from cogworker_async.store.scripts import script
from tests.lua.support import jid_of, make_job

pytestmark = pytest.mark.anyio


def slot_claim(slot: int, *, lock_ms: int = 0, catch_up: bool = False) -> SlotClaim:
    jid = f"{slot:024x}"
    return SlotClaim(
        name="tick",
        slot=str(slot),
        queue="default",
        jid=jid,
        payload=make_job(jid=jid),
        claim_ms=60_000,
        lock_ms=lock_ms,
        catch_up=catch_up,
    )


async def claim(redis: Redis, keys: Keys, slot: int, **options: object) -> ClaimOutcome:
    (outcome,) = await claim_slots(redis, keys, [slot_claim(slot, **options)])  # type: ignore[arg-type]
    return outcome


async def test_concurrent_claims_of_one_slot_push_one_job(redis: Redis, keys: Keys) -> None:
    results: list[str] = []

    async def one() -> None:
        results.append((await claim(redis, keys, 100)).kind)

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(one)
    assert sorted(results) == ["pushed"] + ["taken"] * 19
    queued = await redis.lrange(keys.queue("default"), 0, -1)  # type: ignore[misc]
    assert [jid_of(raw) for raw in queued] == [f"{100:024x}"]
    assert await redis.sismember(keys.queues, "default")  # type: ignore[misc]
    assert await redis.zcard(keys.wakeup("default")) == 1
    ttl = await redis.pttl(keys.periodic_claim("tick", "100"))
    assert 0 < ttl <= 60_000
    # Transitional: the claim as releases before issue 21 wrote it, alike.
    assert 0 < await redis.pttl(keys.periodic_claim_before_21("tick", "", "100")) <= 60_000


async def test_last_slot_only_moves_forward(redis: Redis, keys: Keys) -> None:
    assert (await claim(redis, keys, 200)).kind == "pushed"
    assert (await claim(redis, keys, 190)).kind == "pushed"  # a late claim of an older slot
    assert await redis.hget(keys.periodic_last, "tick") == b"200"  # type: ignore[misc]
    assert (await claim(redis, keys, 210)).kind == "pushed"
    assert await redis.hget(keys.periodic_last, "tick") == b"210"  # type: ignore[misc]


async def test_a_catch_up_claim_runs_only_past_the_last_slot(redis: Redis, keys: Keys) -> None:
    assert (await claim(redis, keys, 300)).kind == "pushed"
    # Its claim key gone (expired), a missed slot at or before the last one never runs.
    await redis.delete(
        keys.periodic_claim("tick", "300"), keys.periodic_claim_before_21("tick", "", "300")
    )
    assert (await claim(redis, keys, 300, catch_up=True)).kind == "done"
    assert (await claim(redis, keys, 290, catch_up=True)).kind == "done"
    assert (await claim(redis, keys, 310, catch_up=True)).kind == "pushed"
    assert await redis.llen(keys.queue("default")) == 2  # type: ignore[misc]
    # A stamp that is not a number reads as never run (and is overwritten).
    await redis.hset(keys.periodic_last, "tick", "garbage")  # type: ignore[misc]
    assert (await claim(redis, keys, 320, catch_up=True)).kind == "pushed"
    assert await redis.hget(keys.periodic_last, "tick") == b"320"  # type: ignore[misc]


async def test_overlap_false_claim_skips_while_the_lock_is_held(redis: Redis, keys: Keys) -> None:
    running = script("periodic_running")
    lock = [keys.periodic_running("tick")]
    assert (await claim(redis, keys, 1, lock_ms=30_000)).kind == "pushed"
    # Skipped: the holder is named.
    assert await claim(redis, keys, 2, lock_ms=30_000) == ClaimOutcome("held", f"{1:024x}")
    # And decided: nobody else claims that slot.
    assert (await claim(redis, keys, 2, lock_ms=30_000)).kind == "taken"
    assert await running.run(redis, lock, [f"{9:024x}", ""]) == 0  # not the holder's jid
    assert await running.run(redis, lock, [f"{1:024x}", ""]) == 1  # the holder releases
    assert (await claim(redis, keys, 3, lock_ms=30_000)).kind == "pushed"
    assert await redis.llen(keys.queue("default")) == 2  # type: ignore[misc]
    await redis.delete(lock[0])
    # A run whose lock expired while it waited takes it again when it starts.
    assert await running.run(redis, lock, [f"{3:024x}", 30_000]) == 1
    assert await redis.get(lock[0]) == f"{3:024x}".encode()


@pytest.mark.parametrize(
    ("which", "expected"),
    [
        ("claim", "string"),
        ("last", "hash"),
        ("queue", "list"),
        ("queues", "set"),
        ("lock", "string"),
        ("before_21", "string"),
    ],
)
async def test_a_wrong_typed_key_is_reported_before_anything_is_written(
    redis: Redis, keys: Keys, which: str, expected: str
) -> None:
    key = {
        "claim": keys.periodic_claim("tick", "5"),
        "last": keys.periodic_last,
        "queue": keys.queue("default"),
        "queues": keys.queues,
        "lock": keys.periodic_running("tick"),
        "before_21": keys.periodic_claim_before_21("tick", "", "5"),
    }[which]
    if expected == "hash":
        await redis.rpush(key, "a list where a hash belongs")  # type: ignore[misc]
    else:
        await redis.hset(key, "a", "a hash where something else belongs")  # type: ignore[misc]
    before = sorted(await redis.keys(f"{keys.ns}:*"))
    outcome = await claim(redis, keys, 5, lock_ms=30_000)
    assert outcome.kind == "wrongtype"
    assert (outcome.key, outcome.expected) == (key, expected)
    assert outcome.found in ("hash", "list")
    # Nothing written: no claim, no lock, no push, no stamp.
    assert sorted(await redis.keys(f"{keys.ns}:*")) == before


async def test_a_bad_last_stamp_is_set_aside_only_while_it_is_what_was_read(
    redis: Redis, keys: Keys
) -> None:
    aside = keys.quarantine(keys.periodic_last)
    await redis.hset(keys.periodic_last, mapping={"tick": "garbage", "other": "12"})  # type: ignore[misc]
    # Rewritten by a claim since it was read: left alone.
    assert await set_aside_last(redis, keys, name="tick", seen=b"older garbage") == "changed"
    assert await set_aside_last(redis, keys, name="tick", seen=b"garbage") == "moved"
    assert await redis.hgetall(keys.periodic_last) == {b"other": b"12"}  # type: ignore[misc]
    assert await redis.hget(aside, "tick") == b"garbage"  # type: ignore[misc]
    assert 0 < await redis.ttl(aside) <= 7 * 86400
    # The set-aside key itself unusable: nothing moved.
    await redis.delete(aside)
    await redis.set(aside, "a string")
    await redis.hset(keys.periodic_last, "tick", "again")  # type: ignore[misc]
    assert await set_aside_last(redis, keys, name="tick", seen=b"again") == "blocked"
    assert await redis.hget(keys.periodic_last, "tick") == b"again"  # type: ignore[misc]
