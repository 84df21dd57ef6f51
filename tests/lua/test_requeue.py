"""requeue.lua (own list on shutdown, a dead process's list on recovery) and give_back.lua."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.keys import Keys
from cogworker_async.store import commands, orphans
from cogworker_async.store.orphans import ORPHANINGS_TTL, RequeueResult
from tests.lua.support import (
    JUDGE_TTL,
    drain,
    enqueue,
    jid_of,
    make_job,
    redis_now,
    trust_judge,
)

pytestmark = pytest.mark.anyio

ME = "host:3:me"
DEAD = "host:4:gone"
THRESHOLD = 10.0
WINDOW = 60.0


async def own_requeue(
    redis: Redis,
    keys: Keys,
    *,
    finished: Sequence[bytes] = (),
    keep: Sequence[bytes] = (),
) -> RequeueResult:
    return await orphans.requeue(
        redis,
        keys,
        identity=ME,
        threshold=None,
        default_queue="default",
        max_orphanings=3,
        live_window=WINDOW,
        finished=finished,
        keep=keep,
    )


async def recover(
    redis: Redis,
    keys: Keys,
    *,
    max_orphanings: int = 3,
    live_window: float = WINDOW,
    finished: Sequence[bytes] = (),
    keep: Sequence[bytes] = (),
) -> RequeueResult:
    return await orphans.requeue(
        redis,
        keys,
        identity=DEAD,
        threshold=THRESHOLD,
        default_queue="default",
        max_orphanings=max_orphanings,
        live_window=live_window,
        finished=finished,
        keep=keep,
        judge=await trust_judge(redis, keys),
        judge_ttl=JUDGE_TTL,
    )


async def fetched_by_me(redis: Redis, keys: Keys, queue: str, count: int) -> list[bytes]:
    jobs = [make_job(queue) for _ in range(count)]
    await enqueue(redis, keys, queue, *jobs)
    got = await commands.fetch(
        redis, keys, identity=ME, queues=[queue], want=count, acks=[], reliable=True
    )
    assert got.jobs == jobs
    await redis.delete(keys.wakeup(queue))
    return jobs


async def orphaned(redis: Redis, keys: Keys, *jobs: bytes) -> None:
    """Jobs on the dead process's list as its fetches left them (oldest first given)."""
    await redis.lpush(keys.in_progress(DEAD), *jobs)


async def stamp_live(redis: Redis, keys: Keys, *queues: str) -> None:
    now = await redis_now(redis)
    await redis.zadd(keys.live_queues, dict.fromkeys(queues, now))


# --- unconditional: the process's own list ---------------------------------------


async def drain_recovered(redis: Redis, key: str, *, marked: bool = False) -> list[bytes]:
    """Drain jobs recovered from a dead process, as written but for the suspect mark.

    ``marked``: each must carry it (orphaned before), else none may (a first
    recovery requeues a job plainly).
    """
    originals = []
    for raw in await drain(redis, key):
        assert raw.startswith(b'{"suspect":1,') == marked, raw
        originals.append(b"{" + raw[len(b'{"suspect":1,') :] if marked else raw)
    return originals


async def test_own_requeue_keeps_original_order(redis: Redis, keys: Keys) -> None:
    a, b, c = await fetched_by_me(redis, keys, "q", 3)
    await stamp_live(redis, keys, "q")
    result = await own_requeue(redis, keys)
    assert result == RequeueResult(False, 3, 0, [], [])
    assert await redis.exists(keys.in_progress(ME)) == 0
    assert await redis.zscore(keys.wakeup("q"), "1") == 0
    assert await drain(redis, keys.queue("q")) == [a, b, c]


async def test_own_requeue_jumps_the_queue(redis: Redis, keys: Keys) -> None:
    (a,) = await fetched_by_me(redis, keys, "q", 1)
    waiting = make_job("q")
    await enqueue(redis, keys, "q", waiting)
    await own_requeue(redis, keys)
    # A requeued job was taken before the waiting one: it runs next.
    assert await drain(redis, keys.queue("q")) == [a, waiting]


async def test_own_requeue_spreads_over_queues(redis: Redis, keys: Keys) -> None:
    a = make_job("qa")
    b = make_job("qb")
    await redis.lpush(keys.in_progress(ME), a, b)
    await stamp_live(redis, keys, "qa", "qb")
    result = await own_requeue(redis, keys)
    assert result.moved == 2
    assert await redis.lrange(keys.queue("qa"), 0, -1) == [a]
    assert await redis.lrange(keys.queue("qb"), 0, -1) == [b]
    assert await redis.exists(keys.wakeup("qa"), keys.wakeup("qb")) == 2


async def test_own_requeue_empty_list(redis: Redis, keys: Keys) -> None:
    assert await own_requeue(redis, keys) == RequeueResult(False, 0, 0, [], [])


async def test_finished_marks_dropped_and_counter_deleted(redis: Redis, keys: Keys) -> None:
    a, b, c = await fetched_by_me(redis, keys, "q", 3)
    await redis.set(keys.orphanings(jid_of(b)), 2)
    await stamp_live(redis, keys, "q")
    result = await own_requeue(redis, keys, finished=[b])
    assert result == RequeueResult(False, 2, 0, [], [])
    assert await redis.exists(keys.orphanings(jid_of(b))) == 0
    assert await redis.exists(keys.in_progress(ME)) == 0
    assert await drain(redis, keys.queue("q")) == [a, c]


async def test_keep_marks_left_on_list(redis: Redis, keys: Keys) -> None:
    a, b, c, d = await fetched_by_me(redis, keys, "q", 4)
    await stamp_live(redis, keys, "q")
    result = await own_requeue(redis, keys, keep=[b, d])
    assert result.moved == 2
    assert result.failed == 0
    # Kept jobs stay, in the order they were listed in.
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [d, b]
    assert await drain(redis, keys.queue("q")) == [a, c]


async def test_own_requeue_does_not_count_orphanings(redis: Redis, keys: Keys) -> None:
    (a,) = await fetched_by_me(redis, keys, "q", 1)
    await own_requeue(redis, keys)
    assert await redis.exists(keys.orphanings(jid_of(a))) == 0


async def test_own_requeue_ignores_liveness(redis: Redis, keys: Keys) -> None:
    (a,) = await fetched_by_me(redis, keys, "q", 1)
    await redis.set(keys.process(ME), "{}")
    await redis.hset(keys.last_beat, ME, await redis_now(redis))
    result = await own_requeue(redis, keys)
    assert not result.alive
    assert await drain(redis, keys.queue("q")) == [a]


async def test_unreadable_payload_goes_to_default_queue(redis: Redis, keys: Keys) -> None:
    junk = b"{not json"
    no_queue = b'{"jid":"abc","class":"x"}'
    await redis.lpush(keys.in_progress(ME), junk, no_queue)
    result = await own_requeue(redis, keys)
    assert result.moved == 2
    assert sorted(await redis.lrange(keys.queue("default"), 0, -1)) == sorted([junk, no_queue])


# --- recovery: is the owner alive? -----------------------------------------------


async def test_presence_key_means_alive(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await orphaned(redis, keys, job)
    await redis.set(keys.process(DEAD), "{}")
    await redis.hset(keys.last_beat, DEAD, await redis_now(redis) - 1000)
    result = await recover(redis, keys)
    assert result == RequeueResult(True, 0, 0, [], [])
    assert await redis.lrange(keys.in_progress(DEAD), 0, -1) == [job]
    assert await redis.exists(keys.queue("q"), keys.orphanings(jid_of(job))) == 0


async def test_recent_last_beat_means_alive(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await orphaned(redis, keys, job)
    await redis.hset(keys.last_beat, DEAD, f"{await redis_now(redis) - 2:.6f}")
    result = await recover(redis, keys)
    assert result.alive
    assert await redis.lrange(keys.in_progress(DEAD), 0, -1) == [job]
    assert await redis.exists(keys.queue("q")) == 0


async def test_old_last_beat_and_no_presence_means_dead(redis: Redis, keys: Keys) -> None:
    a, b = make_job("q"), make_job("q")
    await orphaned(redis, keys, a, b)
    await redis.hset(keys.last_beat, DEAD, f"{await redis_now(redis) - 100:.6f}")
    await stamp_live(redis, keys, "q")
    result = await recover(redis, keys)
    assert result == RequeueResult(False, 2, 0, [], [])
    assert await redis.exists(keys.in_progress(DEAD)) == 0
    assert await drain_recovered(redis, keys.queue("q")) == [a, b]
    for raw in (a, b):
        counter = keys.orphanings(jid_of(raw))
        assert await redis.get(counter) == b"1"
        assert ORPHANINGS_TTL - 60 < await redis.ttl(counter) <= ORPHANINGS_TTL


async def test_no_stamp_and_no_presence_means_dead(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await orphaned(redis, keys, job)
    result = await recover(redis, keys)
    assert not result.alive
    assert result.moved == 1
    assert await drain_recovered(redis, keys.queue("q")) == [job]


async def test_counter_accumulates_over_recoveries(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await redis.set(keys.orphanings(jid_of(job)), 1)
    await orphaned(redis, keys, job)
    assert (await recover(redis, keys)).moved == 1
    assert await redis.get(keys.orphanings(jid_of(job))) == b"2"
    assert await drain_recovered(redis, keys.queue("q"), marked=True) == [job]


async def test_corrupt_last_beat_counts_as_none(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await orphaned(redis, keys, job)
    await redis.hset(keys.last_beat, DEAD, "not-a-number")
    result = await recover(redis, keys)
    assert not result.alive
    assert result.moved == 1
    assert await drain_recovered(redis, keys.queue("q")) == [job]


async def test_corrupt_last_beat_with_presence_is_alive(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await orphaned(redis, keys, job)
    await redis.hset(keys.last_beat, DEAD, "garbage")
    await redis.set(keys.process(DEAD), "{}")
    assert (await recover(redis, keys)).alive
    assert await redis.lrange(keys.in_progress(DEAD), 0, -1) == [job]


async def test_corrupt_counter_string_starts_over(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await redis.set(keys.orphanings(jid_of(job)), "lots")
    await orphaned(redis, keys, job)
    result = await recover(redis, keys, max_orphanings=1)
    assert result.moved == 1
    assert await drain_recovered(redis, keys.queue("q"), marked=True) == [job]
    assert await redis.get(keys.orphanings(jid_of(job))) == b"1"
    assert await redis.exists(keys.repeat_orphans) == 0


async def test_corrupt_counter_hash_starts_over(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    counter = keys.orphanings(jid_of(job))
    await redis.hset(counter, "field", "99")
    await orphaned(redis, keys, job)
    result = await recover(redis, keys, max_orphanings=1)
    assert result.moved == 1
    assert await drain_recovered(redis, keys.queue("q"), marked=True) == [job]
    assert await redis.type(counter) == b"string"
    assert await redis.get(counter) == b"1"


async def test_counter_at_limit_still_requeued(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await redis.set(keys.orphanings(jid_of(job)), 2)
    await orphaned(redis, keys, job)
    result = await recover(redis, keys, max_orphanings=3)
    assert result.moved == 1
    assert await drain_recovered(redis, keys.queue("q"), marked=True) == [job]
    assert await redis.get(keys.orphanings(jid_of(job))) == b"3"


async def test_past_max_orphanings_parked(redis: Redis, keys: Keys) -> None:
    repeat, fresh = make_job("q"), make_job("q")
    await redis.set(keys.orphanings(jid_of(repeat)), 3)
    await orphaned(redis, keys, repeat, fresh)
    result = await recover(redis, keys, max_orphanings=3)
    assert result.moved == 2
    assert result.failed == 0
    assert result.raw_burials == []
    assert await redis.lrange(keys.repeat_orphans, 0, -1) == [repeat]
    assert await drain_recovered(redis, keys.queue("q")) == [fresh]
    assert await redis.exists(keys.in_progress(DEAD)) == 0
    assert await redis.exists(keys.dead) == 0


async def test_zero_max_orphanings_parks_at_once(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await orphaned(redis, keys, job)
    assert (await recover(redis, keys, max_orphanings=0)).moved == 1
    assert await redis.lrange(keys.repeat_orphans, 0, -1) == [job]
    assert await redis.exists(keys.queue("q")) == 0


async def test_unusable_parking_list_buries_raw(redis: Redis, keys: Keys) -> None:
    repeat, fresh = make_job("q"), make_job("q")
    await redis.set(keys.orphanings(jid_of(repeat)), 5)
    await redis.set(keys.repeat_orphans, "i am a string")
    await orphaned(redis, keys, repeat, fresh)
    before = await redis_now(redis)
    result = await recover(redis, keys, max_orphanings=3)
    assert result.raw_burials == [repeat]
    assert result.moved == 2
    dead = await redis.zrange(keys.dead, 0, -1, withscores=True)
    assert dead == [(repeat, pytest.approx(before, abs=5))]
    assert await redis.get(keys.repeat_orphans) == b"i am a string"
    assert await drain_recovered(redis, keys.queue("q")) == [fresh]
    assert await redis.exists(keys.in_progress(DEAD)) == 0


async def test_wrong_type_queue_moves_job_to_back(redis: Redis, keys: Keys) -> None:
    x, y, z = make_job("good"), make_job("bad"), make_job("good")
    await redis.set(keys.queue("bad"), "not a list")
    await orphaned(redis, keys, x, y, z)
    await stamp_live(redis, keys, "good", "bad")
    result = await recover(redis, keys)
    assert result.moved == 2
    assert result.failed == 1
    assert await redis.lrange(keys.in_progress(DEAD), 0, -1) == [y]
    assert await drain_recovered(redis, keys.queue("good")) == [x, z]
    assert await redis.get(keys.queue("bad")) == b"not a list"
    # The job that couldn't be written wasn't counted as orphaned.
    assert await redis.exists(keys.orphanings(jid_of(y))) == 0
    assert await redis.get(keys.orphanings(jid_of(x))) == b"1"


async def test_wrong_type_queue_on_own_list(redis: Redis, keys: Keys) -> None:
    good, bad = make_job("good"), make_job("bad")
    await redis.set(keys.queue("bad"), "x")
    await redis.lpush(keys.in_progress(ME), bad, good)
    await stamp_live(redis, keys, "good")
    result = await own_requeue(redis, keys)
    assert (result.moved, result.failed) == (1, 1)
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [bad]
    assert await redis.lrange(keys.queue("good"), 0, -1) == [good]


async def test_wrong_type_wakeup_marker_never_duplicates(redis: Redis, keys: Keys) -> None:
    """A wrong-typed wake-up marker must not leave the job both queued and in progress."""
    job = make_job("q")
    await redis.set(keys.wakeup("q"), "not a sorted set")
    await orphaned(redis, keys, job)
    await stamp_live(redis, keys, "q")
    await recover(redis, keys)
    on_queue = await redis.lrange(keys.queue("q"), 0, -1)
    in_progress = await redis.lrange(keys.in_progress(DEAD), 0, -1)
    copies = [raw for raw in on_queue + in_progress if raw.endswith(job[1:])]
    assert len(copies) == 1, (on_queue, in_progress)


async def test_unread_queue_reported_and_listed(redis: Redis, keys: Keys) -> None:
    read, unread, stale = make_job("read"), make_job("unread"), make_job("stale")
    await orphaned(redis, keys, read, unread, stale)
    await stamp_live(redis, keys, "read")
    now = await redis_now(redis)
    await redis.zadd(keys.live_queues, {"stale": now - WINDOW - 30})
    result = await recover(redis, keys)
    assert result.moved == 3
    assert sorted(result.unread_queues) == ["stale", "unread"]
    members = await redis.smembers(keys.queues)
    assert {b"stale", b"unread"} <= members
    assert b"read" not in members


async def test_unread_queue_reported_once(redis: Redis, keys: Keys) -> None:
    jobs = [make_job("lonely") for _ in range(3)]
    await redis.lpush(keys.in_progress(ME), *jobs)
    result = await own_requeue(redis, keys)
    assert result.unread_queues == ["lonely"]
    assert await redis.smembers(keys.queues) == {b"lonely"}


async def test_recovery_marks(redis: Redis, keys: Keys) -> None:
    done, kept, other = make_job("q"), make_job("q"), make_job("q")
    await redis.set(keys.orphanings(jid_of(done)), 1)
    await orphaned(redis, keys, done, kept, other)
    await stamp_live(redis, keys, "q")
    result = await recover(redis, keys, finished=[done], keep=[kept])
    assert result.moved == 1
    assert await redis.lrange(keys.in_progress(DEAD), 0, -1) == [kept]
    assert await drain_recovered(redis, keys.queue("q")) == [other]
    assert await redis.exists(keys.orphanings(jid_of(done))) == 0


# --- give_back.lua ------------------------------------------------------------------


async def give_back(redis: Redis, keys: Keys, *jobs: bytes) -> commands.GiveBackResult:
    return await commands.give_back(redis, keys, identity=ME, jobs=jobs, default_queue="default")


async def test_give_back_present(redis: Redis, keys: Keys) -> None:
    a, b = await fetched_by_me(redis, keys, "q", 2)
    waiting = make_job("q")
    await enqueue(redis, keys, "q", waiting)
    await redis.delete(keys.wakeup("q"))
    assert await give_back(redis, keys, a) == commands.GiveBackResult(1, [])
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [b]
    assert await redis.zscore(keys.wakeup("q"), "1") == 0
    assert await drain(redis, keys.queue("q")) == [a, waiting]


async def test_give_back_newest_first_keeps_their_order_ahead_of_the_queue(
    redis: Redis, keys: Keys
) -> None:
    a, b, c = await fetched_by_me(redis, keys, "q", 3)
    waiting = make_job("q")
    await enqueue(redis, keys, "q", waiting)
    assert await give_back(redis, keys, c, b) == commands.GiveBackResult(2, [])
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [a]
    assert await drain(redis, keys.queue("q")) == [b, c, waiting]


async def test_give_back_absent(redis: Redis, keys: Keys) -> None:
    (a,) = await fetched_by_me(redis, keys, "q", 1)
    gone = make_job("q")
    assert await give_back(redis, keys, gone) == commands.GiveBackResult(0, [])
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [a]
    assert await redis.exists(keys.queue("q"), keys.wakeup("q")) == 0


async def test_give_back_twice_moves_once(redis: Redis, keys: Keys) -> None:
    """A repeat after a lost reply finds the jobs gone: nothing is on both lists."""
    a, b = await fetched_by_me(redis, keys, "q", 2)
    assert (await give_back(redis, keys, b, a)).given == 2
    assert await give_back(redis, keys, b, a) == commands.GiveBackResult(0, [])
    assert await drain(redis, keys.queue("q")) == [a, b]
    assert await redis.exists(keys.in_progress(ME)) == 0


async def test_give_back_unreadable_to_default(redis: Redis, keys: Keys) -> None:
    await redis.lpush(keys.in_progress(ME), b"junk")
    assert (await give_back(redis, keys, b"junk")).given == 1
    assert await redis.lrange(keys.queue("default"), 0, -1) == [b"junk"]
    assert await redis.exists(keys.in_progress(ME)) == 0


async def test_give_back_wrong_typed_queue_keeps_that_job_and_moves_the_rest(
    redis: Redis, keys: Keys
) -> None:
    (a,) = await fetched_by_me(redis, keys, "q", 1)
    (broken,) = await fetched_by_me(redis, keys, "bad", 1)
    await redis.set(keys.queue("bad"), "not a list")
    assert await give_back(redis, keys, broken, a) == commands.GiveBackResult(1, [broken])
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [broken]
    assert await drain(redis, keys.queue("q")) == [a]


async def test_give_back_wrong_type_wakeup_never_duplicates(redis: Redis, keys: Keys) -> None:
    (a,) = await fetched_by_me(redis, keys, "q", 1)
    await redis.set(keys.wakeup("q"), "not a sorted set")
    with contextlib.suppress(ResponseError):  # an error is acceptable; a duplicate is not
        await give_back(redis, keys, a)
    on_queue = await redis.lrange(keys.queue("q"), 0, -1)
    in_progress = await redis.lrange(keys.in_progress(ME), 0, -1)
    assert (on_queue + in_progress).count(a) == 1, (on_queue, in_progress)


# --- give_back.lua in basic fetch: jobs on no list, once per marker ----------------


async def give_back_unlisted(
    redis: Redis, keys: Keys, marker: str, *jobs: bytes
) -> commands.GiveBackResult:
    return await commands.give_back(
        redis, keys, identity=ME, jobs=jobs, default_queue="default", once=marker
    )


async def test_give_back_unlisted_pushes_every_job_and_a_repeat_pushes_none(
    redis: Redis, keys: Keys
) -> None:
    """Basic fetch: the jobs are held in memory, not listed. Each is pushed to the
    front of its queue, order kept; the call repeated after a lost reply (same
    marker) returns what the first did and pushes nothing twice."""
    a, b = make_job("q"), make_job("q")
    waiting = make_job("q")
    await enqueue(redis, keys, "q", waiting)
    marker = keys.given_back(f"{ME}:1")
    assert await give_back_unlisted(redis, keys, marker, b, a) == commands.GiveBackResult(2, [])
    assert await give_back_unlisted(redis, keys, marker, b, a) == commands.GiveBackResult(2, [])
    assert await drain(redis, keys.queue("q")) == [a, b, waiting]
    assert 0 < await redis.ttl(marker) <= 86400
    # A new give back (a new marker) of the same payload pushes it again: it is a new one.
    assert (await give_back_unlisted(redis, keys, keys.given_back(f"{ME}:2"), a)).given == 1


async def test_give_back_unlisted_keeps_what_a_wrong_typed_queue_refused_on_a_repeat_too(
    redis: Redis, keys: Keys
) -> None:
    a, broken = make_job("q"), make_job("bad")
    await redis.set(keys.queue("bad"), "not a list")
    marker = keys.given_back(f"{ME}:1")
    expected = commands.GiveBackResult(1, [broken])
    assert await give_back_unlisted(redis, keys, marker, broken, a) == expected
    assert await give_back_unlisted(redis, keys, marker, broken, a) == expected
    assert await drain(redis, keys.queue("q")) == [a]
