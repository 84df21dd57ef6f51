"""The unique-lock scripts against real Redis: enqueue_unique, the release block of
file/bury_orphan/file_unsettled/swap_dead_entry, drop_jobs, delete_orphan_locks."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import api, holds
from cogworker_async.holds import UNIQUE, Hold
from cogworker_async.keys import Keys
from cogworker_async.payload import new_jid
from cogworker_async.store import commands, locks, orphans
from cogworker_async.store.commands import Filing
from tests.lua.support import enqueue, jid_of, kill_from_retry, make_job

pytestmark = pytest.mark.anyio


def unique_job(keys: Keys, tag: str, queue: str = "default") -> tuple[bytes, str, str]:
    lock = keys.unique(f"t.job:{tag}")
    jid = new_jid()
    raw = make_job(queue, jid=jid, unique={"key": lock, "mode": "until_executed", "for": 60})
    return raw, jid, lock


async def _enqueue(
    redis: Redis, keys: Keys, raw: bytes, jid: str, lock: str, due: float | None = None
) -> locks.UniqueEnqueue:
    [done] = await locks.enqueue_unique(
        redis, keys, queue="default", jobs=[locks.UniqueJob(lock, jid, 60, raw, due)]
    )
    return done


async def test_enqueue_unique_locks_and_pushes_once(redis: Redis, keys: Keys) -> None:
    raw, jid, lock = unique_job(keys, "a")
    first = await _enqueue(redis, keys, raw, jid, lock)
    assert first == locks.UniqueEnqueue(True, jid)
    other_raw, other_jid, _ = unique_job(keys, "a")
    second = await _enqueue(redis, keys, other_raw, other_jid, lock)
    assert second == locks.UniqueEnqueue(False, jid)
    assert await redis.lrange(keys.queue("default"), 0, -1) == [raw]
    assert await redis.sismember(keys.queues, "default")
    assert await redis.zcard(keys.wakeup("default")) == 1
    assert 0 < await redis.pttl(lock) <= 60_000


async def test_enqueue_unique_schedules_a_delayed_job(redis: Redis, keys: Keys) -> None:
    raw, jid, lock = unique_job(keys, "s")
    due = time.time() + 100
    assert (await _enqueue(redis, keys, raw, jid, lock, due)).enqueued
    assert await redis.zrange(keys.schedule, 0, -1) == [raw]
    assert await redis.llen(keys.queue("default")) == 0
    assert await redis.zcard(keys.schedule_wakeup) == 1


async def test_concurrent_enqueue_unique_one_winner(redis: Redis, keys: Keys) -> None:
    tries = [unique_job(keys, "c") for _ in range(30)]
    lock = tries[0][2]
    results = await asyncio.gather(*(_enqueue(redis, keys, r, j, lock) for r, j, _ in tries))
    winners = [r for r in results if r.enqueued]
    assert len(winners) == 1
    assert {r.holder for r in results} == {winners[0].holder}
    assert await redis.llen(keys.queue("default")) == 1


async def test_enqueue_unique_many_in_one_call(redis: Redis, keys: Keys) -> None:
    a, b, c = unique_job(keys, "m1"), unique_job(keys, "m2"), unique_job(keys, "m1")
    later = unique_job(keys, "m3")
    await redis.set(b[2], "holder-b")
    jobs = [
        locks.UniqueJob(a[2], a[1], 60, a[0]),
        locks.UniqueJob(b[2], b[1], 60, b[0]),
        locks.UniqueJob(c[2], c[1], 60, c[0]),  # same key as a: a holds it now
        locks.UniqueJob(later[2], later[1], 60, later[0], time.time() + 50),
    ]
    done = await locks.enqueue_unique(redis, keys, queue="default", jobs=jobs)
    assert done == [
        locks.UniqueEnqueue(True, a[1]),
        locks.UniqueEnqueue(False, "holder-b"),
        locks.UniqueEnqueue(False, a[1]),
        locks.UniqueEnqueue(True, later[1]),
    ]
    assert await redis.lrange(keys.queue("default"), 0, -1) == [a[0]]
    assert await redis.zrange(keys.schedule, 0, -1) == [later[0]]


def _held(lock: str, jid: str) -> tuple[Hold, ...]:
    return (Hold(UNIQUE.name, lock, jid),)


async def _run_one(redis: Redis, keys: Keys, raw: bytes, identity: str) -> None:
    await redis.lpush(keys.in_progress(identity), raw)


@pytest.mark.parametrize("target", ["dead", "discard"])
async def test_file_releases_only_its_own_lock(redis: Redis, keys: Keys, target: str) -> None:
    raw, jid, lock = unique_job(keys, "f")
    for holder, released in ((jid, True), ("someone-else", False)):
        await redis.set(lock, holder)
        await _run_one(redis, keys, raw, "me")
        filing = Filing(
            raw,
            jid,
            keys.dead if target == "dead" else None,
            time.time(),
            raw if target == "dead" else b"",
            holds=_held(lock, jid),
        )
        filed = await commands.file(
            redis, keys, identity="me", filing=filing, dead_max_jobs=100, dead_timeout=3600
        )
        assert filed
        assert (not await redis.exists(lock)) == released


async def test_file_without_the_block_leaves_locks(redis: Redis, keys: Keys) -> None:
    raw, jid, lock = unique_job(keys, "r")
    await redis.set(lock, jid)
    await _run_one(redis, keys, raw, "me")
    filing = Filing(raw, jid, keys.retry, time.time() + 10, raw)
    assert await commands.file(
        redis, keys, identity="me", filing=filing, dead_max_jobs=100, dead_timeout=3600
    )
    assert await redis.get(lock) == jid.encode()


async def test_file_of_a_job_no_longer_listed_keeps_the_lock(redis: Redis, keys: Keys) -> None:
    raw, jid, lock = unique_job(keys, "g")
    await redis.set(lock, jid)
    filing = Filing(raw, jid, keys.dead, time.time(), raw, holds=_held(lock, jid))
    assert not await commands.file(
        redis, keys, identity="me", filing=filing, dead_max_jobs=100, dead_timeout=3600
    )
    assert await redis.exists(lock)  # requeued by recovery: it runs again, still holding it


async def test_bury_orphan_releases(redis: Redis, keys: Keys) -> None:
    raw, jid, lock = unique_job(keys, "b")
    await redis.set(lock, jid)
    await redis.rpush(keys.repeat_orphans, raw)
    assert await orphans.bury_orphan(redis, keys, raw=raw, jid=jid, dead_entry=raw)
    assert not await redis.exists(lock)
    assert await redis.zcard(keys.dead) == 1


async def test_swap_dead_entry_and_file_unsettled_release(redis: Redis, keys: Keys) -> None:
    raw, jid, lock = unique_job(keys, "w")
    await redis.set(lock, jid)
    await redis.zadd(keys.dead, {raw: 1})
    assert await orphans.swap_dead_entry(redis, keys, old=raw, new=raw + b" ", score=2, burial=True)
    assert not await redis.exists(lock)

    await redis.set(lock, jid)
    filing = Filing(raw, jid, keys.dead, 5.0, raw, holds=_held(lock, jid))
    record = commands.unsettled_record(filing, keys)
    assert orjson.loads(record)["release"] == [lock, jid]
    await redis.rpush(keys.unsettled, record)
    assert await commands.file_unsettled(
        redis,
        keys,
        record=record,
        target=keys.dead,
        jid=jid,
        score=5.0,
        entry=raw,
    )
    assert not await redis.exists(lock)


async def test_drop_jobs_releases_what_it_removes(redis: Redis, keys: Keys) -> None:
    jobs = [unique_job(keys, f"d{i}") for i in range(3)]
    for raw, jid, lock in jobs:
        await redis.set(lock, jid)
        await redis.zadd(keys.dead, {raw: 1})
    await redis.set(jobs[2][2], "newer-copy")  # a newer copy holds it now: kept
    plain = make_job()
    await redis.zadd(keys.dead, {plain: 2})
    assert (
        await locks.drop_jobs(redis, keys.dead, entries=[jobs[0][0]], kinds=holds.kinds_table(keys))
        == 1
    )
    assert not await redis.exists(jobs[0][2])
    assert await redis.exists(jobs[1][2])
    assert await locks.drop_jobs(redis, keys.dead, pop=10, kinds=holds.kinds_table(keys)) == 3
    assert not await redis.exists(jobs[1][2])
    assert await redis.get(jobs[2][2]) == b"newer-copy"

    queued = [unique_job(keys, f"q{i}") for i in range(2)]
    for raw, jid, lock in queued:
        await redis.set(lock, jid)
        await redis.lpush(keys.queue("default"), raw)
    assert (
        await locks.drop_jobs(
            redis, keys.queue("default"), pop=1, kind="list", kinds=holds.kinds_table(keys)
        )
        == 1
    )
    assert not await redis.exists(queued[0][2])  # the oldest went first
    assert await redis.exists(queued[1][2])


async def test_drop_jobs_wrong_type_removes_nothing(redis: Redis, keys: Keys) -> None:
    await redis.set(keys.dead, "oops")
    with pytest.raises(Exception, match="WRONGTYPE"):
        await locks.drop_jobs(redis, keys.dead, pop=10, kinds=holds.kinds_table(keys))
    assert await redis.get(keys.dead) == b"oops"


@pytest.mark.parametrize(
    "where",
    ["queue", "schedule", "retry", "in_progress", "workers", "unsettled", "repeat", "nowhere"],
)
async def test_delete_orphaned(redis: Redis, keys: Keys, where: str) -> None:
    raw, jid, lock = unique_job(keys, "o", queue="mail")
    await redis.set(lock, jid)
    if where == "queue":
        await redis.sadd(keys.queues, "mail")
        await redis.lpush(keys.queue("mail"), raw)
    elif where == "schedule":
        await redis.zadd(keys.schedule, {raw: 1})
    elif where == "retry":
        await redis.zadd(keys.retry, {raw: 1})
    elif where == "in_progress":
        await redis.sadd(keys.in_progress_identities, "p1")
        await redis.lpush(keys.in_progress("p1"), raw)
    elif where == "workers":
        await redis.sadd(keys.processes, "p2")
        await redis.hset(keys.workers("p2"), "0", orjson.dumps({"payload": raw.decode()}))
    elif where == "unsettled":
        await redis.rpush(keys.unsettled, orjson.dumps({"payload": raw.decode()}))
    elif where == "repeat":
        await redis.rpush(keys.repeat_orphans, raw)
    deleted = await api.delete_orphaned(redis, keys)
    assert [one.key for one in deleted] == ([lock] if where == "nowhere" else [])
    assert (await redis.exists(lock)) == (where != "nowhere")
    assert jid_of(raw) == jid


async def test_delete_orphan_locks_is_owner_checked(redis: Redis, keys: Keys) -> None:
    """A lock that changed hands (or type) since it was found orphaned is kept."""
    same, changed, odd = keys.unique("t:same"), keys.unique("t:changed"), keys.unique("t:odd")
    await redis.set(same, "a" * 24)
    await redis.set(changed, "newer")
    await redis.hset(odd, "f", "v")
    done = await locks.delete_orphan_locks(
        redis, [(same, b"a" * 24), (changed, b"b" * 24), (odd, b"c" * 24)]
    )
    assert done == [True, False, False]
    assert not await redis.exists(same)
    assert await redis.get(changed) == b"newer"
    assert await redis.type(odd) == b"hash"


@pytest.mark.parametrize("via", ["fetch", "ack"])
async def test_acks_release_their_locks_unless_the_job_was_gone(
    redis: Redis, keys: Keys, via: str
) -> None:
    """The release block rides with the acks: a job acked releases its lock (owner-
    checked); a job no longer on the list (requeued by recovery) keeps it."""
    done, gone, plain = unique_job(keys, "k1"), unique_job(keys, "k2"), make_job()
    newer = unique_job(keys, "k3")
    for _, jid, lock in (done, gone):
        await redis.set(lock, jid)
    await redis.set(newer[2], "a-newer-copy")
    await redis.lpush(keys.in_progress("me"), done[0], plain, newer[0])  # not `gone`
    acks = [
        commands.Ack(done[0], done[1], holds=_held(done[2], done[1])),
        commands.Ack(plain, jid_of(plain)),
        commands.Ack(gone[0], gone[1], holds=_held(gone[2], gone[1])),
        commands.Ack(newer[0], newer[1], holds=_held(newer[2], newer[1])),
    ]
    await enqueue(redis, keys, "default", make_job())
    if via == "fetch":
        result = await commands.fetch(
            redis, keys, identity="me", queues=["default"], want=1, acks=acks, reliable=True
        )
        missing = result.missing_acks
        assert len(result.jobs) == 1  # the queue names after the block were read right
    else:
        missing = await commands.ack(redis, keys, identity="me", acks=acks)
    assert missing == [acks[2]]
    assert not await redis.exists(done[2])
    assert await redis.get(gone[2]) == gone[1].encode()  # it runs again: still its lock
    assert await redis.get(newer[2]) == b"a-newer-copy"


async def test_an_operator_kill_releases_a_unique_lock(redis: Redis, keys: Keys) -> None:
    raw, jid, lock = unique_job(keys, "kill")
    for holder, released in ((jid, True), ("a-newer-copy", False)):
        await redis.set(lock, holder)
        assert await kill_from_retry(redis, keys, raw)
        assert (await redis.exists(lock) == 0) == released
        await redis.delete(keys.dead)


async def test_enqueue_unique_moves_a_wrong_typed_lock_aside(redis: Redis, keys: Keys) -> None:
    raw, jid, lock = unique_job(keys, "q")
    await redis.rpush(lock, "not", "a", "lock")
    done = await _enqueue(redis, keys, raw, jid, lock)
    assert done == locks.UniqueEnqueue(True, jid)
    assert await redis.get(lock) == jid.encode()
    assert await redis.lrange(keys.quarantine(lock), 0, -1) == [b"not", b"a", b"lock"]
    assert await redis.lrange(keys.queue("default"), 0, -1) == [raw]


async def test_renew_unique(redis: Redis, keys: Keys) -> None:
    lock = keys.unique("t.job:r")
    assert await locks.renew_unique(redis, [(lock, "me", 30)]) == ["me"]  # free: taken
    assert 25_000 < await redis.pttl(lock) <= 30_000
    await redis.pexpire(lock, 100)
    assert await locks.renew_unique(redis, [(lock, "me", 30)]) == ["me"]  # own: renewed
    assert 25_000 < await redis.pttl(lock) <= 30_000
    assert await locks.renew_unique(redis, [(lock, "other", 90)]) == ["me"]  # not ours
    assert await redis.pttl(lock) <= 30_000
    years = 5 * 365 * 86400.0  # any unique_for the duration rule admits
    odd, free = keys.unique("t.job:odd"), keys.unique("t.job:free")
    await redis.hset(odd, "f", "v")
    renewed = await locks.renew_unique(
        redis, [(lock, "me", years), (odd, "me", 30), (free, "you", 10)]
    )
    assert renewed == ["me", None, "you"]
    assert await redis.pttl(lock) > (years - 60) * 1000
    assert await redis.type(odd) == b"hash"
    assert 5_000 < await redis.pttl(free) <= 10_000


async def test_a_years_long_unique_for_delayed(redis: Redis, keys: Keys) -> None:
    raw, jid, lock = unique_job(keys, "y")
    years = 5 * 365 * 86400.0
    [done] = await locks.enqueue_unique(
        redis,
        keys,
        queue="default",
        jobs=[locks.UniqueJob(lock, jid, years, raw, time.time() + years)],
    )
    assert done.enqueued
    assert await redis.pttl(lock) > (2 * years - 60) * 1000
