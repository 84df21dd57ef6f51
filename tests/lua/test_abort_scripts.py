"""abort_entry.lua, abort_running.lua and settle_aborted.lua (and their searches)."""

from __future__ import annotations

import time
import uuid

import orjson
import pytest
import redis as sync_redis
from redis.asyncio import Redis

from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.holds import PERIODIC_RUNNING, UNIQUE, Hold
from cogworker_async.keys import Keys
from cogworker_async.store import aborts, commands
from tests.lua.support import enqueue, jid_of, make_job, new_jid

pytestmark = pytest.mark.anyio

ME = "host:3:me"


async def _aborted_count(redis: Redis, keys: Keys) -> int:
    return int(await redis.get(keys.stat("aborted")) or 0)


async def test_a_queued_job_is_found_across_windows_and_removed(redis: Redis, keys: Keys) -> None:
    jobs = [make_job("q") for _ in range(25)]
    await enqueue(redis, keys, "q", *jobs)
    target = jobs[0]  # the oldest: at the tail, in the last window from the head
    removed = await aborts.remove_waiting(redis, keys, jid_of(target), window=4)
    assert removed == aborts.Removed(keys.queue("q"), target)
    left = await redis.lrange(keys.queue("q"), 0, -1)
    assert target not in left
    assert len(left) == 24
    assert await redis.zscore(keys.aborted, jid_of(target)) is not None
    assert await _aborted_count(redis, keys) == 1


async def test_a_jid_inside_another_jobs_args_is_not_taken_for_it(redis: Redis, keys: Keys) -> None:
    victim = make_job("q")
    jid = jid_of(victim)
    decoy = make_job("q", args=[jid])
    await enqueue(redis, keys, "q", decoy, victim)
    removed = await aborts.remove_waiting(redis, keys, jid)
    assert removed is not None
    assert removed.entry == victim
    assert await redis.lrange(keys.queue("q"), 0, -1) == [decoy]


async def test_one_window_call_says_where_to_go_on(redis: Redis, keys: Keys) -> None:
    jobs = [make_job("q") for _ in range(5)]
    await enqueue(redis, keys, "q", *jobs)
    queue, nobody = keys.queue("q"), "0" * 24
    first = await aborts.abort_entry(redis, keys, source=queue, jid=nobody, window=2)
    assert first == aborts.EntryReply(None, 2)
    last = await aborts.abort_entry(redis, keys, source=queue, jid=nobody, start=4, window=2)
    assert last == aborts.EntryReply(None, -1)
    assert await redis.zcard(keys.aborted) == 0
    assert await _aborted_count(redis, keys) == 0


@pytest.mark.parametrize("where", ["schedule", "retry"])
async def test_a_scheduled_or_retrying_job_is_removed(redis: Redis, keys: Keys, where: str) -> None:
    source = keys.schedule if where == "schedule" else keys.retry
    others = {make_job("q"): 100.0 + i for i in range(300)}  # past listpack: ZSCAN in steps
    target = make_job("q")
    await redis.zadd(source, {**others, target: 50.0})
    removed = await aborts.remove_waiting(redis, keys, jid_of(target), window=50)
    assert removed == aborts.Removed(source, target)
    assert await redis.zscore(source, target) is None
    assert await redis.zcard(source) == 300
    assert await aborts.remove_waiting(redis, keys, jid_of(target)) is None


async def test_an_entry_gone_meanwhile_is_not_counted(redis: Redis, keys: Keys) -> None:
    entry = make_job("q")
    reply = await aborts.abort_entry(
        redis, keys, source=keys.schedule, jid=jid_of(entry), member=entry
    )
    assert reply == aborts.EntryReply(None, -1)
    assert await redis.zcard(keys.aborted) == 0
    assert await _aborted_count(redis, keys) == 0


async def test_tombstones_older_than_keep_are_pruned(redis: Redis, keys: Keys) -> None:
    now = time.time()
    await redis.zadd(keys.aborted, {"old": now - aborts.TOMBSTONE_KEEP - 10, "new": now - 5})
    heard = await aborts.abort_running(redis, keys, "a" * 24)
    assert heard == 0  # nobody subscribed
    assert await redis.zrange(keys.aborted, 0, -1) == [b"new", b"a" * 24]


async def test_abort_running_publishes_the_jid(redis: Redis, keys: Keys) -> None:
    pubsub = redis.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(keys.aborts)
    try:
        assert await aborts.abort_running(redis, keys, "b" * 24) == 1
        message = None
        while message is None:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
        assert message["data"] == b"b" * 24
    finally:
        await pubsub.aclose()


async def _fetched(redis: Redis, keys: Keys, *jobs: bytes) -> None:
    await enqueue(redis, keys, "q", *jobs)
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["q"], want=len(jobs), acks=[], reliable=True
    )
    assert got.jobs == list(jobs)


async def test_find_running_looks_at_in_progress_lists(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await _fetched(redis, keys, job)
    await redis.sadd(keys.in_progress_identities, ME)
    assert await aborts.find_running(redis, keys, jid_of(job))
    assert not await aborts.find_running(redis, keys, "c" * 24)


async def test_settle_aborted_removes_counts_and_keeps_the_tombstone(
    redis: Redis, keys: Keys
) -> None:
    job, other = make_job("q"), make_job("q")
    await _fetched(redis, keys, job, other)
    jid = jid_of(job)
    await redis.set(keys.orphanings(jid), 1)
    assert await aborts.settle_aborted(redis, keys, identity=ME, raw=job, jid=jid)
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [other]
    assert await redis.exists(keys.orphanings(jid)) == 0
    assert await _aborted_count(redis, keys) == 1
    assert await redis.zscore(keys.aborted, jid) is not None
    assert int(await redis.get(keys.stats_failed) or 0) == 0
    # Owner-checked: settled once, or acked first, a second settlement does nothing.
    assert not await aborts.settle_aborted(redis, keys, identity=ME, raw=job, jid=jid)
    await commands.ack(redis, keys, identity=ME, acks=[commands.Ack(other, jid_of(other))])
    assert not await aborts.settle_aborted(redis, keys, identity=ME, raw=other, jid=jid_of(other))
    assert await _aborted_count(redis, keys) == 1


async def test_finished_is_known_from_tombstone_status_result_or_dead(
    redis: Redis, keys: Keys
) -> None:
    jids = ["1" * 24, "2" * 24, "3" * 24, "4" * 24]
    await redis.zadd(keys.aborted, {jids[0]: time.time()})
    await redis.hset(keys.status(jids[1]), "state", "complete")
    await redis.set(keys.result_gone(jids[2]), b"1")
    await redis.zadd(keys.dead, {make_job("q", jid=jids[3]): time.time()})
    for jid in jids:
        assert await aborts.finished(redis, keys, jid), jid
    await redis.hset(keys.status("5" * 24), "state", "working")
    assert not await aborts.finished(redis, keys, "5" * 24)
    assert not await aborts.finished(redis, keys, "6" * 24)


async def test_find_running_asks_a_basic_process_what_it_runs(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    work = orjson.dumps({"queue": "q", "payload": job.decode(), "run_at": 1.0})
    await redis.sadd(keys.processes, "basic:1:p")
    await redis.hset(keys.workers("basic:1:p"), "0", work)
    assert await aborts.find_running(redis, keys, jid_of(job))
    # A process with an in-progress list is asked its list, not its (stale) workers hash.
    await redis.sadd(keys.in_progress_identities, "basic:1:p")
    assert not await aborts.find_running(redis, keys, jid_of(job))


async def test_a_user_refused_the_channel_still_leaves_the_tombstone(
    redis: Redis, keys: Keys, sync_client: sync_redis.Redis, redis_server: EmbeddedRedis
) -> None:
    user = f"nochannel{uuid.uuid4().hex[:8]}"
    sync_client.execute_command("ACL", "SETUSER", user, "on", ">pw", "~*", "resetchannels", "+@all")
    limited = Redis(host="127.0.0.1", port=redis_server.port or 0, username=user, password="pw")
    try:
        assert await aborts.abort_running(limited, keys, "d" * 24) == -1
    finally:
        await limited.aclose()
        sync_client.execute_command("ACL", "DELUSER", user)
    assert await redis.zscore(keys.aborted, "d" * 24) is not None


def _held(kind: str, lock: str, jid: str) -> tuple[Hold, ...]:
    name = UNIQUE.name if kind == "unique" else PERIODIC_RUNNING.name
    return (Hold(name, lock, jid),)


def _lock_holding_job(keys: Keys, kind: str) -> tuple[bytes, str]:
    """A queued job that holds a lock: a unique one, or a periodic running lock."""
    jid = new_jid()
    if kind == "unique":
        lock = keys.unique("t.job:abort")
        unique = {"key": lock, "mode": "until_executed", "for": 60}
        return make_job("q", jid=jid, unique=unique), lock
    fields = {"periodic_pjid": "nightly", "periodic_slot": 60.0, "periodic_until_executed": True}
    return make_job("q", jid=jid, **fields), keys.periodic_running("nightly")


@pytest.mark.parametrize("kind", ["unique", "periodic"])
@pytest.mark.parametrize("where", ["queue", "schedule"])
async def test_an_aborted_waiting_job_releases_its_lock_owner_checked(
    redis: Redis, keys: Keys, kind: str, where: str
) -> None:
    """It never runs, so its lock goes in the step that removes it; a lock a
    newer copy holds stays."""
    for holder, released in (("self", True), ("a-newer-copy", False)):
        job, lock = _lock_holding_job(keys, kind)
        jid = jid_of(job)
        await redis.set(lock, jid if holder == "self" else holder)
        if where == "queue":
            await enqueue(redis, keys, "q", job)
        else:
            await redis.zadd(keys.schedule, {job: time.time() + 60})
        removed = await aborts.remove_waiting(redis, keys, jid)
        assert removed is not None
        assert removed.entry == job
        assert (await redis.exists(lock) == 0) == released
        await redis.delete(lock)


@pytest.mark.parametrize("kind", ["unique", "periodic"])
async def test_settle_aborted_releases_the_lock_it_is_given(
    redis: Redis, keys: Keys, kind: str
) -> None:
    job, lock = _lock_holding_job(keys, kind)
    jid = jid_of(job)
    await _fetched(redis, keys, job)
    await redis.set(lock, jid)
    assert await aborts.settle_aborted(
        redis, keys, identity=ME, raw=job, jid=jid, holds=_held(kind, lock, jid)
    )
    assert await redis.exists(lock) == 0
    # Owner-checked, and a job no longer listed (requeued by recovery) keeps it.
    again, lock = _lock_holding_job(keys, kind)
    await _fetched(redis, keys, again)
    await redis.set(lock, "a-newer-copy")
    assert await aborts.settle_aborted(
        redis,
        keys,
        identity=ME,
        raw=again,
        jid=jid_of(again),
        holds=_held(kind, lock, jid_of(again)),
    )
    assert await redis.get(lock) == b"a-newer-copy"
    await redis.set(lock, jid_of(again))
    assert not await aborts.settle_aborted(
        redis,
        keys,
        identity=ME,
        raw=again,
        jid=jid_of(again),
        holds=_held(kind, lock, jid_of(again)),
    )
    assert await redis.get(lock) == jid_of(again).encode()


async def _file_failure(
    redis: Redis, keys: Keys, raw: bytes, target: str, **extra: object
) -> commands.FileOutcome:
    entry = orjson.dumps({**orjson.loads(raw), "retry_count": 0, "error_class": "E"})
    filing = commands.Filing(raw, jid_of(raw), target, time.time() + 600, entry, **extra)  # type: ignore[arg-type]
    return await commands.file(
        redis, keys, identity=ME, filing=filing, dead_max_jobs=100, dead_timeout=86_400.0
    )


async def test_a_retry_filing_of_a_tombstoned_job_is_settled_as_aborted(
    redis: Redis, keys: Keys
) -> None:
    """Issue 21 item 2: an abort answered "cancelling" while the failure was filed
    (its tombstone written first) means the job never runs again: no retry entry."""
    raw, other = make_job("q"), make_job("q")
    await _fetched(redis, keys, raw, other)
    lock = keys.unique("d" * 16)
    await redis.set(lock, jid_of(raw))
    await redis.set(keys.orphanings(jid_of(raw)), 1)
    await aborts.abort_running(redis, keys, jid_of(raw))
    outcome = await _file_failure(
        redis, keys, raw, keys.retry, holds=_held("unique", lock, jid_of(raw))
    )
    assert outcome is commands.FileOutcome.ABORTED
    assert await redis.zcard(keys.retry) == 0
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [other]
    assert await _aborted_count(redis, keys) == 1
    assert await redis.get(keys.stats_failed) is None
    assert await redis.exists(lock, keys.orphanings(jid_of(raw))) == 0
    # Without a tombstone, and into dead even with one: filed as before.
    assert await _file_failure(redis, keys, other, keys.retry) is commands.FileOutcome.FILED
    assert await redis.zcard(keys.retry) == 1
    dead = make_job("q")
    await _fetched(redis, keys, dead)
    await aborts.abort_running(redis, keys, jid_of(dead))
    assert await _file_failure(redis, keys, dead, keys.dead) is commands.FileOutcome.FILED
    assert await redis.zcard(keys.dead) == 1


async def test_a_wrong_typed_tombstone_set_never_stops_a_retry_filing(
    redis: Redis, keys: Keys
) -> None:
    raw = make_job("q")
    await _fetched(redis, keys, raw)
    await redis.set(keys.aborted, "not a sorted set")
    assert await _file_failure(redis, keys, raw, keys.retry) is commands.FileOutcome.FILED
    assert await redis.zcard(keys.retry) == 1


async def test_abort_running_tombstones_only_a_job_still_where_it_was_found(
    redis: Redis, keys: Keys
) -> None:
    """Found on a list, then filed into retry before the tombstone: nothing is
    written, and the caller is told to look again (never a "cancelling" answer for
    a job that is retrying)."""
    raw = make_job("q")
    await _fetched(redis, keys, raw)
    await redis.sadd(keys.in_progress_identities, ME)
    found = await aborts.find_running(redis, keys, jid_of(raw))
    assert found == aborts.RunningAt((keys.in_progress(ME), raw))
    await _file_failure(redis, keys, raw, keys.retry)
    assert await aborts.abort_running(redis, keys, jid_of(raw), found) == aborts.MOVED_ON
    assert await redis.zcard(keys.aborted) == 0
    # Still there: tombstoned (nobody listens: 0 heard).
    again = make_job("q")
    await _fetched(redis, keys, again)
    at = await aborts.find_running(redis, keys, jid_of(again))
    assert await aborts.abort_running(redis, keys, jid_of(again), at) == 0
    assert await redis.zscore(keys.aborted, jid_of(again)) is not None
