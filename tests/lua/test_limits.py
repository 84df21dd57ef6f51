"""includes/limits.lua and the limit slot hold (includes/holds.lua): a job over a
concurrency limit is held in order, a freed slot lets the oldest held one back
onto its queue, every path in releases only its own slot, and a key of the
wrong type never fails the step around it."""

from __future__ import annotations

import orjson
import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async import holds
from cogworker_async.holds import Event
from cogworker_async.keys import Keys
from cogworker_async.store import commands, locks
from cogworker_async.store import limits as limits_store
from tests.lua.support import enqueue, make_job
from tests.lua.test_holds import settle_payload

pytestmark = pytest.mark.anyio

ME = "host:1:me"


@pytest.fixture(autouse=True)
async def _limits_used(redis: Redis, keys: Keys) -> None:
    """As a client does before its first job with limits."""
    await limits_store.mark_limits_used(redis, keys)


def limited(jid: str, *names: str, n: int = 1, queue: str = "default") -> bytes:
    """Led by its limits, then its jid, as ``payload.encode_job`` writes it."""
    body = {"limits": [["concurrency", name, n] for name in names], "jid": jid}
    body.update(orjson.loads(make_job(queue=queue, jid=jid, limit_slots=list(names))))
    return orjson.dumps(body)


async def take(redis: Redis, keys: Keys, want: int = 10) -> list[bytes]:
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["default"], want=want, acks=[], reliable=True
    )
    return got.jobs


async def test_the_fetch_takes_up_to_the_limit_and_holds_the_rest_in_order(
    redis: Redis, keys: Keys
) -> None:
    jobs = [limited(f"j{i}", "k", n=2) for i in range(5)]
    plain = make_job(jid="p")
    await enqueue(redis, keys, "default", *jobs, plain)
    taken = await take(redis, keys)
    # Two of k's run, the plain job behind the held ones is not blocked by them.
    assert taken == [jobs[0], jobs[1], plain]
    assert await redis.smembers(keys.limit_slots("k")) == {b"j0", b"j1"}
    assert await redis.lrange(keys.limit_parked("k"), 0, -1) == [jobs[4], jobs[3], jobs[2]]
    assert await redis.llen(keys.queue("default")) == 0
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [plain, jobs[1], jobs[0]]


async def test_a_namespace_without_limits_checks_no_job(redis: Redis, keys: Keys) -> None:
    await redis.delete(keys.limits_used)
    await redis.sadd(keys.limit_slots("k"), "other")
    job = limited("j0", "k")
    await enqueue(redis, keys, "default", job)
    assert await take(redis, keys) == [job]  # a producer that did not say so: unchecked
    assert await redis.smembers(keys.limit_slots("k")) == {b"other"}


async def test_a_release_unparks_the_oldest_held_job_of_its_key_only(
    redis: Redis, keys: Keys
) -> None:
    jobs = [limited(f"j{i}", "k") for i in range(3)]
    await enqueue(redis, keys, "default", *jobs)
    assert await take(redis, keys) == [jobs[0]]
    # Not a member (a job that holds no slot, a release made twice): nothing moves.
    await settle_payload(redis, keys, limited("stranger", "k"), Event.ACK, started=True)
    assert await redis.llen(keys.limit_parked("k")) == 2
    # The holder's ack: its slot goes, j1 (the oldest) is back at the queue's tail.
    held = holds.read(orjson.loads(jobs[0]), keys)
    acks = [commands.Ack(jobs[0], "j0", holds=held)]
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == []
    assert await redis.scard(keys.limit_slots("k")) == 0
    assert await redis.lrange(keys.queue("default"), 0, -1) == [jobs[1]]
    assert await take(redis, keys) == [jobs[1]]
    assert await redis.lrange(keys.limit_parked("k"), 0, -1) == [jobs[2]]


@pytest.mark.parametrize(
    "event", [Event.RECOVERY_REQUEUE, Event.SHUTDOWN_REQUEUE, Event.BURIAL, Event.ABORT]
)
async def test_a_payload_read_path_releases_every_slot_the_job_names(
    redis: Redis, keys: Keys, event: Event
) -> None:
    await enqueue(redis, keys, "default", limited("j0", "a", "b"), limited("j1", "a", "b"))
    assert len(await take(redis, keys)) == 1
    await settle_payload(redis, keys, limited("j0", "a", "b"), event, started=True)
    assert await redis.scard(keys.limit_slots("a")) == 0
    assert await redis.scard(keys.limit_slots("b")) == 0
    assert await redis.lrange(keys.queue("default"), 0, -1) == [limited("j1", "a", "b")]


async def test_a_deferred_release_of_a_slot_goes_through_release_locks(
    redis: Redis, keys: Keys
) -> None:
    await redis.sadd(keys.limit_slots("k"), "j0", "j9")
    prefixes = [kind.prefix(keys) for kind in holds.KINDS.values()]
    released = await locks.release_locks(redis, [(keys.limit_slots("k"), "j0")], prefixes)
    assert released == 1
    assert await redis.smembers(keys.limit_slots("k")) == {b"j9"}


async def test_the_run_time_limit_overrides_the_payloads(redis: Redis, keys: Keys) -> None:
    await redis.hset(keys.limit_config, "k", 3)
    jobs = [limited(f"j{i}", "k", n=1) for i in range(4)]
    await enqueue(redis, keys, "default", *jobs)
    assert await take(redis, keys) == jobs[:3]


async def test_a_slot_key_of_the_wrong_type_fails_nothing(redis: Redis, keys: Keys) -> None:
    await redis.set(keys.limit_slots("k"), "not a set")
    job = limited("j0", "k")
    await enqueue(redis, keys, "default", job)
    assert await take(redis, keys) == [job]  # taken as a plain job
    await settle_payload(redis, keys, job, Event.RECOVERY_REQUEUE, started=True)
    assert await redis.get(keys.limit_slots("k")) == b"not a set"


async def test_a_blocking_take_over_the_limit_is_held_and_off_the_list(
    redis: Redis, keys: Keys
) -> None:
    await redis.sadd(keys.limit_slots("k"), "other")
    job = limited("j0", "k")
    await redis.lpush(keys.in_progress(ME), job)
    admitted = await limits_store.admit_taken(redis, keys, identity=ME, job=job, reliable=True)
    assert admitted is limits_store.Admission.PARKED
    assert await redis.llen(keys.in_progress(ME)) == 0
    assert await redis.lrange(keys.limit_parked("k"), 0, -1) == [job]
    # Gone from the list meanwhile (recovery took it back): neither run nor held.
    again = await limits_store.admit_taken(redis, keys, identity=ME, job=job, reliable=True)
    assert again is limits_store.Admission.GONE
    assert await redis.llen(keys.limit_parked("k")) == 1
    # Room again: admitted, its slot taken.
    await redis.srem(keys.limit_slots("k"), "other")
    await redis.lpush(keys.in_progress(ME), job)
    ok = await limits_store.admit_taken(redis, keys, identity=ME, job=job, reliable=True)
    assert ok is limits_store.Admission.RUN
    assert await redis.smembers(keys.limit_slots("k")) == {b"j0"}


def windowed(jid: str, name: str, n: int, per: float, *more: list[object]) -> bytes:
    return make_job(jid=jid, limits=[["window", name, n, per], *more])


async def test_a_window_admits_n_starts_and_holds_the_rest_until_it_reopens(
    redis: Redis, keys: Keys
) -> None:
    jobs = [windowed(f"w{i}", "w", 3, 60) for i in range(5)]
    await enqueue(redis, keys, "default", *jobs)
    assert await take(redis, keys) == jobs[:3]
    assert await redis.lrange(keys.limit_parked("w"), 0, -1) == [jobs[4], jobs[3]]
    assert await redis.hget(keys.limit_windows, "w") == b"window 3 60000"
    # Due when the oldest start leaves the window, a minute on.
    next_in = await limits_store.limits_due(redis, keys)
    assert next_in is not None
    assert 55 < next_in <= 60
    assert await redis.llen(keys.limit_parked("w")) == 2  # not yet
    # The minute has passed (the starts are moved back): both go back, in order.
    log = keys.limit_window("w")
    starts = await redis.zrange(log, 0, -1, withscores=True)
    await redis.zadd(log, {member: score - 61_000 for member, score in starts})
    await redis.zadd(keys.limit_due, {"w": 0})
    assert await limits_store.limits_due(redis, keys) is None
    assert await redis.lrange(keys.queue("default"), 0, -1) == [jobs[4], jobs[3]]
    assert not await redis.exists(keys.limit_windows)
    assert await take(redis, keys) == [jobs[3], jobs[4]]


async def test_a_window_with_room_for_one_lets_one_in_and_stays_due(
    redis: Redis, keys: Keys
) -> None:
    jobs = [windowed(f"w{i}", "w", 2, 60) for i in range(5)]
    await enqueue(redis, keys, "default", *jobs)
    assert len(await take(redis, keys)) == 2
    log = keys.limit_window("w")
    oldest = await redis.zrange(log, 0, 0, withscores=True)
    await redis.zadd(log, {oldest[0][0]: oldest[0][1] - 61_000})
    await redis.zadd(keys.limit_due, {"w": 0})
    next_in = await limits_store.limits_due(redis, keys)
    assert next_in is not None  # the other start leaves later: due again then
    assert await redis.lrange(keys.queue("default"), 0, -1) == [jobs[2]]
    assert await redis.llen(keys.limit_parked("w")) == 2


async def test_a_job_over_one_limit_takes_nothing_of_the_others(redis: Redis, keys: Keys) -> None:
    await redis.sadd(keys.limit_slots("c"), "other")
    job = windowed("j0", "w", 5, 60, ["concurrency", "c", 1])
    await enqueue(redis, keys, "default", job)
    assert await take(redis, keys) == []
    assert not await redis.exists(keys.limit_window("w"))  # no start counted
    assert await redis.lrange(keys.limit_parked("c"), 0, -1) == [job]
    full = windowed("j1", "w", 1, 60, ["concurrency", "d", 1])
    await redis.zadd(keys.limit_window("w"), {"x": 10**13})  # a start just now
    await enqueue(redis, keys, "default", full)
    assert await take(redis, keys) == []
    assert not await redis.exists(keys.limit_slots("d"))  # no slot taken


async def test_a_back_off_pauses_the_key_and_holds_the_job_first_in_line(
    redis: Redis, keys: Keys
) -> None:
    jobs = [limited(f"j{i}", "k", n=2) for i in range(4)]
    await enqueue(redis, keys, "default", *jobs)
    assert await take(redis, keys) == jobs[:2]  # j2, j3 held on the full key
    done = await limits_store.back_off(
        redis, keys, identity=ME, job=jobs[0], key="k", seconds=30, reliable=True
    )
    assert done
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [jobs[1]]
    # Its slot went, but the pause let nobody in; it is next in line.
    assert await redis.smembers(keys.limit_slots("k")) == {b"j1"}
    assert await redis.lrange(keys.limit_parked("k"), 0, -1) == [jobs[3], jobs[2], jobs[0]]
    assert 25_000 < await redis.pttl(keys.limit_pause("k")) <= 30_000
    # The other slot frees: still nobody in while paused.
    held = holds.read(orjson.loads(jobs[1]), keys)
    assert (
        await commands.ack(redis, keys, identity=ME, acks=[commands.Ack(jobs[1], "j1", holds=held)])
        == []
    )
    assert await redis.llen(keys.queue("default")) == 0
    # A new job of the key is held too, without a slot.
    fresh = limited("j9", "k", n=2)
    await enqueue(redis, keys, "default", fresh)
    assert await take(redis, keys) == []
    next_in = await limits_store.limits_due(redis, keys)
    assert next_in is not None
    assert 25 < next_in <= 30
    # The pause ends: the limit's room (2) is let in, the backed-off job first.
    await redis.delete(keys.limit_pause("k"))
    await redis.zadd(keys.limit_due, {"k": 0})
    assert await limits_store.limits_due(redis, keys) is None
    assert await take(redis, keys) == [jobs[0], jobs[2]]
    assert await redis.llen(keys.limit_parked("k")) == 2


async def test_a_back_off_of_a_job_gone_from_the_list_changes_nothing(
    redis: Redis, keys: Keys
) -> None:
    job = limited("j0", "k")
    done = await limits_store.back_off(
        redis, keys, identity=ME, job=job, key="k", seconds=5, reliable=True
    )
    assert not done
    assert not await redis.exists(keys.limit_pause("k"))
    assert not await redis.exists(keys.limit_parked("k"))


async def test_a_back_off_on_a_bookkeeping_key_is_refused(redis: Redis, keys: Keys) -> None:
    job = limited("j0", "k")
    await redis.lpush(keys.in_progress(ME), job)
    with pytest.raises(ResponseError, match="a limit key"):
        await limits_store.back_off(
            redis, keys, identity=ME, job=job, key="~due", seconds=5, reliable=True
        )
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [job]


async def test_a_bucket_lets_its_capacity_start_then_one_per_refill(
    redis: Redis, keys: Keys
) -> None:
    jobs = [make_job(jid=f"b{i}", limits=[["bucket", "b", 3, 0.5]]) for i in range(5)]
    await enqueue(redis, keys, "default", *jobs)
    assert await take(redis, keys) == jobs[:3]  # the capacity at once
    assert await redis.llen(keys.limit_parked("b")) == 2
    assert await redis.hget(keys.limit_windows, "b") == b"bucket 3 2000"
    next_in = await limits_store.limits_due(redis, keys)  # a token in 2 s
    assert next_in is not None
    assert 1.5 < next_in <= 2
    # Two seconds later (the last take moved back): one token, one job in.
    await redis.hset(keys.limit_bucket("b"), "at", int(await _now_ms(redis)) - 2_100)
    await redis.zadd(keys.limit_due, {"b": 0})
    assert await limits_store.limits_due(redis, keys) is not None  # the other waits on
    assert await take(redis, keys) == [jobs[3]]
    assert await redis.lrange(keys.limit_parked("b"), 0, -1) == [jobs[4]]


async def test_a_leaky_bucket_spaces_starts_evenly(redis: Redis, keys: Keys) -> None:
    jobs = [make_job(jid=f"l{i}", limits=[["leaky", "l", 2, 10]]) for i in range(3)]
    await enqueue(redis, keys, "default", *jobs)
    assert await take(redis, keys) == jobs[:1]  # no burst: one, then one every 5 s
    assert await redis.llen(keys.limit_parked("l")) == 2
    next_in = await limits_store.limits_due(redis, keys)
    assert next_in is not None
    assert 4.5 < next_in <= 5
    await redis.set(keys.limit_leaky("l"), int(await _now_ms(redis)) - 1)  # 5 s on
    await redis.zadd(keys.limit_due, {"l": 0})
    assert await limits_store.limits_due(redis, keys) is not None
    assert await take(redis, keys) == [jobs[1]]
    assert 4_000 < await redis.pttl(keys.limit_leaky("l")) <= 10_000


async def _now_ms(redis: Redis) -> float:
    seconds, micros = await redis.time()
    return seconds * 1000 + micros / 1000


def pointed(jid: str, cost: float, points: int = 10, per: float = 10) -> bytes:
    return make_job(jid=jid, limits=[["points", "p", points, per, cost]])


async def test_points_are_taken_by_cost_and_held_jobs_wait_for_theirs(
    redis: Redis, keys: Keys
) -> None:
    jobs = [pointed("p0", 6), pointed("p1", 3), pointed("p2", 4), pointed("p3", 1)]
    await enqueue(redis, keys, "default", *jobs)
    # 10 points: 6 + 3 start; 4 is more than the 1 left: held, and the 1 after
    # it is held too only if it comes to its turn (a queue is served in order).
    assert await take(redis, keys) == [jobs[0], jobs[1], jobs[3]]
    assert await redis.lrange(keys.limit_parked("p"), 0, -1) == [jobs[2]]
    assert await redis.hget(keys.limit_windows, "p") == b"points 10 1000"
    next_in = await limits_store.limits_due(redis, keys)  # 4 points in 4 s (1 a second)
    assert next_in is not None
    assert 2.5 < next_in <= 4
    # A run cost 2 less than its estimate: given back, the held job's 4 are there.
    left = await limits_store.settle_points(
        redis, keys, "p", give_back=4, points=10, interval_ms=1000
    )
    assert 4 <= left < 4.5
    assert await limits_store.limits_due(redis, keys) is None
    assert await take(redis, keys) == [jobs[2]]


async def test_a_real_cost_above_the_estimate_takes_the_budget_below_zero(
    redis: Redis, keys: Keys
) -> None:
    await enqueue(redis, keys, "default", pointed("p0", 10), pointed("p1", 1))
    assert len(await take(redis, keys)) == 1
    left = await limits_store.settle_points(
        redis, keys, "p", give_back=-5, points=10, interval_ms=1000
    )
    assert -5.5 < left <= -4.9
    await redis.zadd(keys.limit_due, {"p": 0})  # its due, come: not yet in
    next_in = await limits_store.limits_due(redis, keys)  # 1 point needs ~6 s now
    assert next_in is not None
    assert 5 < next_in <= 6.1
    assert await redis.llen(keys.limit_parked("p")) == 1


async def test_a_wrong_typed_due_key_never_parks_a_job_it_runs(redis: Redis, keys: Keys) -> None:
    await redis.set(keys.limit_due, "not a sorted set")
    jobs = [windowed(f"w{i}", "w", 1, 60) for i in range(2)]
    await enqueue(redis, keys, "default", *jobs)
    # The second is over its window, but its due can't be written: taken as a
    # plain job rather than both held and run.
    assert await take(redis, keys) == jobs
    assert not await redis.exists(keys.limit_parked("w"))


async def test_a_back_off_onto_a_wrong_typed_list_loses_nothing(redis: Redis, keys: Keys) -> None:
    await redis.set(keys.limit_parked("k"), "not a list")
    job = limited("j0", "k")
    await redis.lpush(keys.in_progress(ME), job)
    with pytest.raises(ResponseError, match="wrong type"):
        await limits_store.back_off(
            redis, keys, identity=ME, job=job, key="k", seconds=5, reliable=True
        )
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [job]  # filed by the caller


async def test_a_release_into_a_wrong_typed_queue_keeps_the_job_held(
    redis: Redis, keys: Keys
) -> None:
    jobs = [limited(f"j{i}", "k", queue="odd") for i in range(3)]
    await enqueue(redis, keys, "odd", *jobs)
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["odd"], want=10, acks=[], reliable=True
    )
    assert got.jobs == [jobs[0]]
    await redis.delete(keys.queue("odd"))
    await redis.set(keys.queue("odd"), "not a list")
    await settle_payload(redis, keys, jobs[0], Event.ACK, started=True)
    assert await redis.scard(keys.limit_slots("k")) == 0  # released all the same
    assert await redis.lrange(keys.limit_parked("k"), 0, -1) == [jobs[2], jobs[1]]


async def test_each_admission_is_counted_per_key_in_a_ten_second_bucket(
    redis: Redis, keys: Keys
) -> None:
    """What admitted/s is read from (`limits list`, the Limits page, the scrape):
    an admitted job counts once per key it names; a held one and a plain one not."""
    jobs = [limited(f"j{i}", "k", "other", n=2) for i in range(3)]
    plain = make_job(jid="p")
    await enqueue(redis, keys, "default", *jobs, plain)
    before = limits_store.last_full_bucket(await redis.time()) + 1
    assert len(await take(redis, keys)) == 3  # j0, j1 and the plain one; j2 held
    after = limits_store.last_full_bucket(await redis.time()) + 1
    counted: dict[str, float] = {}
    for bucket in range(before, after + 1):  # the take's own bucket (a boundary: both)
        raw = await redis.hgetall(keys.limit_admitted(bucket))
        for name, rate in limits_store.admitted_per_second(raw).items():
            counted[name] = counted.get(name, 0) + rate
        if raw:
            assert 0 < await redis.pttl(keys.limit_admitted(bucket)) <= 30_000
    assert counted == {"k": 0.2, "other": 0.2}  # 2 admissions in 10 s
