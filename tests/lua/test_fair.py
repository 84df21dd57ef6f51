"""includes/fair.lua through the fetch: fair jobs of many keys sharing a queue
are taken by turns (``weight`` a turn), plain jobs still flow, a limit still
parks, a blocking wait is fed, and a namespace without the flag is untouched."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store import limits as limits_store
from tests.lua.support import enqueue, make_job

pytestmark = pytest.mark.anyio

ME = "host:1:me"


@pytest.fixture(autouse=True)
async def _fair_used(redis: Redis, keys: Keys) -> None:
    """As a client does before its first fair job."""
    await limits_store.mark_limits_used(redis, keys, fair=True)


def fair(key: str, jid: str, weight: int = 1, **extra: object) -> bytes:
    return make_job(jid=jid, fair=[key, weight], **extra)


def key_of(raw: bytes) -> str:
    body = orjson.loads(raw)
    return str(body["fair"][0]) if "fair" in body else "plain"


async def take(redis: Redis, keys: Keys, want: int) -> list[bytes]:
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["default"], want=want, acks=[], reliable=True
    )
    return got.jobs


async def test_keys_are_taken_round_robin_whatever_their_backlog(redis: Redis, keys: Keys) -> None:
    a = [fair("a", f"a{i}") for i in range(50)]
    b = [fair("b", f"b{i}") for i in range(3)]
    await enqueue(redis, keys, "default", *a)
    await enqueue(redis, keys, "default", *b)
    taken = await take(redis, keys, 6)
    # A's 50 came first, yet B's 3 go in turn with A's, each key in its order.
    assert taken == [a[0], b[0], a[1], b[1], a[2], b[2]]
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == taken[::-1]
    # The rest wait on A's line (its next fed back onto the list for a
    # blocking wait): nothing lost, nothing twice.
    assert await redis.lrange(keys.queue("default"), 0, -1) == [a[3]]
    assert await redis.llen(keys.fair_jobs("default", "a")) == 46
    assert not await redis.exists(keys.fair_jobs("default", "b"))
    assert await redis.lrange(keys.fair_ring("default"), 0, -1) == [b"a"]


async def test_turns_carry_over_calls_of_one_job(redis: Redis, keys: Keys) -> None:
    await enqueue(redis, keys, "default", *(fair("a", f"a{i}") for i in range(4)))
    await enqueue(redis, keys, "default", *(fair("b", f"b{i}") for i in range(4)))
    order = [key_of(job) for _ in range(6) for job in await take(redis, keys, 1)]
    assert order == ["a", "b", "a", "b", "a", "b"]


async def test_a_weighted_key_gets_its_weight_a_turn(redis: Redis, keys: Keys) -> None:
    await enqueue(redis, keys, "default", *(fair("a", f"a{i}", 3) for i in range(60)))
    await enqueue(redis, keys, "default", *(fair("b", f"b{i}") for i in range(60)))
    # Calls of odd sizes: a turn left part way goes on in the next call.
    order = [
        key_of(job) for want in (5, 2, 7, 1, 9, 4, 12) for job in await take(redis, keys, want)
    ]
    assert len(order) == 40
    assert order[:8] == ["a", "a", "a", "b", "a", "a", "a", "b"]
    assert Counter(order) == {"a": 30, "b": 10}


async def test_plain_jobs_still_flow_first_and_a_limit_still_parks(
    redis: Redis, keys: Keys
) -> None:
    limited = [
        fair("a", f"a{i}", limits=[["concurrency", "c", 1]], limit_slots=["c"]) for i in range(3)
    ]
    plain = make_job(jid="p")
    await enqueue(redis, keys, "default", *limited, plain, fair("b", "b0"))
    taken = await take(redis, keys, 10)
    # The plain job first, then the turns: a0 runs, a1 and a2 are parked on c.
    assert taken[:2] == [plain, limited[0]]
    assert [key_of(job) for job in taken[2:]] == ["b"]
    assert await redis.lrange(keys.limit_parked("c"), 0, -1) == [limited[2], limited[1]]
    assert await redis.smembers(keys.limit_slots("c")) == {b"a0"}
    assert not await redis.exists(keys.fair_ring("default"))


async def test_a_full_call_feeds_the_next_turn_to_a_blocking_wait(redis: Redis, keys: Keys) -> None:
    jobs = [fair("a", f"a{i}") for i in range(3)]
    await enqueue(redis, keys, "default", *jobs)
    assert await take(redis, keys, 1) == [jobs[0]]
    # The list is empty but a line waits: its next job is on the list for a
    # BLMOVE, and the wake-up marker is set for a multi-queue wait.
    assert await redis.lrange(keys.queue("default"), 0, -1) == [jobs[1]]
    assert await redis.exists(keys.wakeup("default"))
    # A fetch that meets the fed job takes it, not back in line.
    assert await take(redis, keys, 1) == [jobs[1]]
    assert await take(redis, keys, 5) == [jobs[2]]
    assert await redis.llen(keys.queue("default")) == 0
    assert not await redis.exists(keys.fair_ring("default"))


async def test_a_paused_queue_serves_no_turn(redis: Redis, keys: Keys) -> None:
    await enqueue(redis, keys, "default", *(fair("a", f"a{i}") for i in range(3)))
    await take(redis, keys, 1)
    await redis.sadd(keys.paused, "default")
    assert await take(redis, keys, 5) == []


async def test_without_the_flag_a_fair_job_is_taken_as_a_plain_one(
    redis: Redis, keys: Keys
) -> None:
    await redis.delete(keys.fair_used)
    a = [fair("a", f"a{i}") for i in range(3)]
    await enqueue(redis, keys, "default", *a, fair("b", "b0"))
    taken = await take(redis, keys, 3)
    assert taken == a
    assert not await redis.exists(keys.fair_ring("default"))


async def test_a_line_of_the_wrong_type_takes_its_job_as_a_plain_one(
    redis: Redis, keys: Keys
) -> None:
    await redis.set(keys.fair_jobs("default", "a"), "x")
    job = fair("a", "a0")
    await enqueue(redis, keys, "default", job)
    assert await take(redis, keys, 5) == [job]


async def test_a_turn_cut_short_by_the_room_goes_on_in_the_next_call(
    redis: Redis, keys: Keys
) -> None:
    for key in "abc":
        await enqueue(redis, keys, "default", *(fair(key, f"{key}{i}", 2) for i in range(1, 5)))
    calls = [
        [orjson.loads(job)["jid"] for job in await take(redis, keys, n)] for n in (5, 1, 3, 10)
    ]
    # c's turn is cut after one job; the next call's first job is its second
    # (fed onto the list for a blocking wait, as each full call does).
    assert calls == [["a1", "a2", "b1", "b2", "c1"], ["c2"], ["a3", "a4", "b3"], ["b4", "c3", "c4"]]
    assert not await redis.exists(keys.fair_ring("default"), keys.fair_base("default") + ":c")
    assert await redis.hkeys(keys.fair_base("default")) == [b"~fed"]


async def test_one_key_fills_a_call_of_any_size(redis: Redis, keys: Keys) -> None:
    """A call of more than a hundred turns (a worker's fetch may want that many)
    is filled, not cut short: a short call tells the worker the queue is dry,
    and it would wait on the list while the line still held jobs."""
    await enqueue(redis, keys, "default", *(fair("a", f"a{i}") for i in range(300)))
    assert len(await take(redis, keys, 250)) == 250
    assert len(await take(redis, keys, 250)) == 50


async def test_a_fair_job_admitted_by_its_limit_counts_in_admitted_per_second(
    redis: Redis, keys: Keys
) -> None:
    """The fair lines admit through admit_job outside the plain path: the fetch
    still adds their admissions to the admitted/s bucket (includes/limits.lua)."""
    jobs = [
        fair("a", f"a{i}", limits=[["concurrency", "c", 2]], limit_slots=["c"]) for i in range(3)
    ]
    await enqueue(redis, keys, "default", *jobs)
    before = limits_store.last_full_bucket(await redis.time()) + 1
    assert len(await take(redis, keys, 10)) == 2
    after = limits_store.last_full_bucket(await redis.time()) + 1
    counted = 0.0
    for bucket in range(before, after + 1):
        raw = await redis.hgetall(keys.limit_admitted(bucket))
        counted += limits_store.admitted_per_second(raw).get("c", 0.0)
    assert counted == 0.2  # 2 admissions in 10 s
