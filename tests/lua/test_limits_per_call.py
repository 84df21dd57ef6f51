"""What a limited job costs (issue 23 §8) without a guarantee lost: a fetch counts a
concurrency key's slots once a call and adds them in one SADD a key, reads a
payload's limits from its head, and asks the run-time limits and pauses once a
call; an ack releases a key's slots in one SREM and lets as many held jobs in."""

from __future__ import annotations

from typing import Any

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
async def _limits_used(redis: Redis, keys: Keys) -> None:
    await limits_store.mark_limits_used(redis, keys)


def led(jid: str, name: str, n: int, **extra: Any) -> bytes:
    """A limited job as ``payload.encode_job`` writes it: its limits, then its jid, first."""
    body: dict[str, Any] = {"limits": [["concurrency", name, n]], "jid": jid}
    body.update(orjson.loads(make_job(jid=jid, limit_slots=[name], **extra)))
    return orjson.dumps(body)


async def fetch(
    redis: Redis, keys: Keys, want: int = 10, acks: list[commands.Ack] | None = None
) -> list[bytes]:
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["default"], want=want, acks=acks or [], reliable=True
    )
    return got.jobs


async def calls(redis: Redis) -> dict[str, int]:
    stats = await redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


async def test_one_call_counts_a_keys_slots_once_and_never_over_admits(
    redis: Redis, keys: Keys
) -> None:
    await redis.sadd(keys.limit_slots("k"), "running-elsewhere")
    jobs = [led(f"j{i}", "k", 3) for i in range(6)]
    await enqueue(redis, keys, "default", *jobs)
    await redis.config_resetstat()
    assert await fetch(redis, keys) == jobs[:2]  # 1 running + 2 = the limit of 3
    assert await redis.smembers(keys.limit_slots("k")) == {b"running-elsewhere", b"j0", b"j1"}
    assert await redis.lrange(keys.limit_parked("k"), 0, -1) == jobs[:1:-1]  # in order
    seen = await calls(redis)
    assert seen.get("scard") == 1
    assert seen.get("sadd") == 1
    # No run-time limit, no pause anywhere: neither is asked of the key.
    assert "hget" not in seen
    assert "pttl" not in seen


async def test_a_job_already_holding_its_slot_is_let_in_on_a_full_key(
    redis: Redis, keys: Keys
) -> None:
    """A job taken again while its jid is still a member (a requeue that found
    it running on) holds its slot once, as before."""
    await redis.sadd(keys.limit_slots("k"), "j0")
    again, other = led("j0", "k", 1), led("j1", "k", 1)
    await enqueue(redis, keys, "default", again, other)
    assert await fetch(redis, keys) == [again]
    assert await redis.smembers(keys.limit_slots("k")) == {b"j0"}
    assert await redis.lrange(keys.limit_parked("k"), 0, -1) == [other]


@pytest.mark.parametrize(
    "name",
    ["a]", 'a]],"jid":"forged', "a[", 'a"b', "a\\b"],
)
async def test_a_name_that_breaks_the_head_is_read_by_the_whole_decode(
    redis: Redis, keys: Keys, name: str
) -> None:
    jobs = [led(f"j{i}", name, 1) for i in range(3)]
    await enqueue(redis, keys, "default", *jobs)
    assert await fetch(redis, keys) == jobs[:1]
    assert await redis.smembers(keys.limit_slots(name)) == {b"j0"}
    assert await redis.llen(keys.limit_parked(name)) == 2


async def test_limits_named_inside_the_arguments_are_not_the_jobs(redis: Redis, keys: Keys) -> None:
    """Only the payload's top-level "limits" count: an argument named so, before
    it (the jid-first order of other producers) or after a head, is data."""
    decoy = {"limits": [["concurrency", "decoy", 100]]}
    first = make_job(jid="j0", kwargs=decoy, limits=[["concurrency", "k", 1]], limit_slots=["k"])
    assert first.index(b'"limits"') < first.rindex(b'"limits"')  # the decoy comes first
    second = led("j1", "k", 1, kwargs=decoy)
    await enqueue(redis, keys, "default", first, second)
    assert await fetch(redis, keys) == [first]
    assert await redis.smembers(keys.limit_slots("k")) == {b"j0"}
    assert not await redis.exists(keys.limit_slots("decoy"))
    assert await redis.lrange(keys.limit_parked("k"), 0, -1) == [second]


async def test_one_ack_releases_a_keys_slots_together_and_lets_as_many_in_in_order(
    redis: Redis, keys: Keys
) -> None:
    jobs = [led(f"j{i}", "k", 3) for i in range(7)]
    await enqueue(redis, keys, "default", *jobs)
    running = await fetch(redis, keys)
    assert running == jobs[:3]
    acks = [commands.Ack(job, f"j{i}", slots=["k"]) for i, job in enumerate(running)]
    await redis.config_resetstat()
    # The three slots go in one SREM; three held jobs come back, oldest first.
    assert await fetch(redis, keys, want=2, acks=acks) == jobs[3:5]
    seen = await calls(redis)
    assert seen.get("srem") == 1
    assert seen.get("rpop") == 1
    assert await redis.smembers(keys.limit_slots("k")) == {b"j3", b"j4"}
    assert await fetch(redis, keys) == [jobs[5]]  # the third let in, then the key is full
    assert await redis.lrange(keys.limit_parked("k"), 0, -1) == [jobs[6]]


async def test_an_ack_of_a_job_recovery_requeued_keeps_its_slot(redis: Redis, keys: Keys) -> None:
    jobs = [led(f"j{i}", "k", 2) for i in range(3)]
    await enqueue(redis, keys, "default", *jobs)
    running = await fetch(redis, keys)
    assert running == jobs[:2]
    await redis.lrem(keys.in_progress(ME), 1, jobs[0])  # requeued by recovery meanwhile
    acks = [commands.Ack(job, f"j{i}", slots=["k"]) for i, job in enumerate(running)]
    assert await fetch(redis, keys, want=0, acks=acks) == []
    # Only j1's slot went (j0 runs again and keeps its own), and one held job came in.
    assert await redis.smembers(keys.limit_slots("k")) == {b"j0"}
    assert await redis.lrange(keys.queue("default"), 0, -1) == [jobs[2]]


async def test_a_back_off_marks_that_a_key_is_paused_for_at_least_as_long(
    redis: Redis, keys: Keys
) -> None:
    jobs = [led(f"j{i}", "k", 2) for i in range(3)]
    await enqueue(redis, keys, "default", *jobs)
    assert await fetch(redis, keys) == jobs[:2]
    assert not await redis.exists(keys.limits_paused)
    await limits_store.back_off(
        redis, keys, identity=ME, job=jobs[0], key="k", seconds=30, reliable=True
    )
    assert await redis.pttl(keys.limits_paused) >= await redis.pttl(keys.limit_pause("k")) > 0
    # A shorter pause of another key leaves the mark as long as it was.
    await enqueue(redis, keys, "default", led("o1", "other", 1))
    assert len(await fetch(redis, keys)) == 1
    await limits_store.back_off(
        redis, keys, identity=ME, job=led("o1", "other", 1), key="other", seconds=1, reliable=True
    )
    assert await redis.pttl(keys.limits_paused) > 25_000
    # The slot j1 frees lets nobody in while k is paused: the pause is seen.
    acks = [commands.Ack(jobs[1], "j1", slots=["k"])]
    await enqueue(redis, keys, "default", led("j9", "k", 2))
    assert await fetch(redis, keys, acks=acks) == []
    assert await redis.llen(keys.limit_parked("k")) == 3


async def test_a_run_time_limit_is_read_when_one_is_set(redis: Redis, keys: Keys) -> None:
    await limits_store.set_limit(redis, keys, "k", "1")
    jobs = [led(f"j{i}", "k", 5) for i in range(3)]
    await enqueue(redis, keys, "default", *jobs)
    assert await fetch(redis, keys) == jobs[:1]  # 1 set at run time, not the payload's 5


async def test_admissions_of_many_keys_in_one_call_add_to_their_counts(
    redis: Redis, keys: Keys
) -> None:
    """A call admitting jobs of more than two keys adds them in one HMGET and
    one HSET (includes/limits.lua, flush_admitted): counts add, none is lost."""
    for rounds in (1, 2):
        jobs = [led(f"r{rounds}j{i}", f"k{i % 4}", 100) for i in range(8)]
        await enqueue(redis, keys, "default", *jobs)
        await redis.config_resetstat()
        assert len(await fetch(redis, keys)) == 8
        assert (await calls(redis)).get("hincrby") is None
    buckets = [k async for k in redis.scan_iter(keys.limit_admitted("*"))]
    total: dict[bytes, int] = {}
    for bucket in buckets:
        assert 0 < await redis.pttl(bucket) <= 30_000
        for name, n in (await redis.hgetall(bucket)).items():
            total[name] = total.get(name, 0) + int(n)
    assert total == {b"k0": 4, b"k1": 4, b"k2": 4, b"k3": 4}


async def test_a_key_named_twice_by_a_job_counts_it_once(redis: Redis, keys: Keys) -> None:
    twice = [["concurrency", "k", 2], ["concurrency", "k", 2]]
    jobs = [
        orjson.dumps({"limits": twice, "jid": f"j{i}", "queue": "default", "limit_slots": ["k"]})
        for i in range(3)
    ]
    await enqueue(redis, keys, "default", *jobs)
    assert await fetch(redis, keys) == jobs[:2]
    assert await redis.smembers(keys.limit_slots("k")) == {b"j0", b"j1"}
    assert await redis.lrange(keys.limit_parked("k"), 0, -1) == [jobs[2]]


async def test_a_head_like_the_last_one_but_longer_is_read_whole(redis: Redis, keys: Keys) -> None:
    """The fetch reuses the last head when a payload starts with it; a head
    that only starts like it (a longer list) is read as its own."""
    short = led("j0", "k", 5)
    longer = orjson.dumps(
        {
            "limits": [["concurrency", "k", 5], ["concurrency", "full", 1]],
            "jid": "j1",
            "queue": "default",
            "limit_slots": ["k", "full"],
        }
    )
    await redis.sadd(keys.limit_slots("full"), "other")
    await enqueue(redis, keys, "default", short, longer)
    assert await fetch(redis, keys) == [short]  # j1 waits on "full", not let in as k's
    assert await redis.lrange(keys.limit_parked("full"), 0, -1) == [longer]
