"""includes/acked_ends.lua through ack.lua and fetch.lua: a tracked job's result and
final status written in the ack's own step."""

from __future__ import annotations

import uuid

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.client import results
from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import Ack, End, Start
from tests.lua.support import enqueue, jid_of, make_job

pytestmark = pytest.mark.anyio

ME = "host:1:me"


def _end(
    jid: str, *, value: object = None, keep: float | None = 60, state: str | None = None
) -> End:
    """As the worker's tracker builds it: the one-key shape (store/results.py)."""
    status = b"" if state is None else commands.status_json({"state": state, "finished_at": 5.5})
    if keep is None:
        return End(jid, status, 600, b"", 0)
    seconds, marker = results.result_ttls(keep)
    envelope = results.encode_success(value, gone_for=marker - seconds)
    return End(jid, status, 600, envelope, marker)


async def _fetched(redis: Redis, keys: Keys, count: int) -> list[bytes]:
    jobs = [make_job("q") for _ in range(count)]
    await enqueue(redis, keys, "q", *jobs)
    fetched = await commands.fetch(
        redis, keys, identity=ME, queues=["q"], want=count, acks=[], reliable=True
    )
    return fetched.jobs


async def test_ack_writes_result_and_status_of_the_jobs_that_carry_them(
    redis: Redis, keys: Keys
) -> None:
    """The result in one key (no marker beside it): kept 60 s, then 60 s more
    saying only that its job finished."""
    plain, kept, tracked = await _fetched(redis, keys, 3)
    pubsub = redis.pubsub()
    await pubsub.subscribe(keys.result_ready(jid_of(kept)))
    acks = [
        Ack(plain, jid_of(plain)),
        Ack(kept, jid_of(kept), end=_end(jid_of(kept), value={"n": 1}, state="complete")),
        Ack(tracked, jid_of(tracked), end=_end(jid_of(tracked), keep=None, state="complete")),
    ]
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == []
    assert await redis.llen(keys.in_progress(ME)) == 0
    result = keys.result(jid_of(kept))
    envelope = await redis.lindex(result, 0)
    assert orjson.loads(envelope) == {"ok": True, "value": {"n": 1}, "gone_for": 60}
    assert 60 < await redis.ttl(result) <= 120
    assert not results.expired(envelope, await redis.pttl(result))
    assert results.expired(envelope, 60_000)  # its last 60 s: past its keeping
    assert not await redis.exists(keys.result_gone(jid_of(kept)))
    status = await redis.hgetall(keys.status(jid_of(kept)))
    assert status == {b"state": b"complete", b"finished_at": b"5.5"}
    assert 0 < await redis.ttl(keys.status(jid_of(kept))) <= 600
    assert await redis.hget(keys.status(jid_of(tracked)), "state") == b"complete"
    assert not await redis.exists(keys.result(jid_of(tracked)), keys.status(jid_of(plain)))
    assert not await redis.exists(keys.result(jid_of(plain)))
    message = None
    for _ in range(20):
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
        if message is not None:
            break
    assert message is not None
    assert message["data"] == b"1"
    await pubsub.aclose()


async def test_fetch_writes_ends_with_its_acks_and_still_takes_by_queue_name(
    redis: Redis, keys: Keys
) -> None:
    (done,) = await _fetched(redis, keys, 1)
    waiting = make_job("q")
    await enqueue(redis, keys, "q", waiting)
    fetched = await commands.fetch(
        redis,
        keys,
        identity=ME,
        queues=["q"],
        want=1,
        acks=[Ack(done, jid_of(done), end=_end(jid_of(done), value=[1, 2]))],
        reliable=True,
    )
    assert fetched.jobs == [waiting]
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [waiting]
    envelope = await redis.lindex(keys.result(jid_of(done)), 0)
    assert orjson.loads(envelope)["value"] == [1, 2]


async def test_a_result_is_written_even_when_its_job_was_gone(redis: Redis, keys: Keys) -> None:
    """Recovery requeued it while it ran here: it ran all the same, its result is true."""
    raw = make_job("q")
    missing = await commands.ack(
        redis, keys, identity=ME, acks=[Ack(raw, jid_of(raw), end=_end(jid_of(raw), value=3))]
    )
    assert [m.raw for m in missing] == [raw]
    assert orjson.loads(await redis.lindex(keys.result(jid_of(raw)), 0))["value"] == 3


async def test_a_wrong_typed_key_loses_only_its_own_end(redis: Redis, keys: Keys) -> None:
    first, second = await _fetched(redis, keys, 2)
    await redis.set(keys.status(jid_of(first)), "not a hash")
    acks = [
        Ack(first, jid_of(first), end=_end(jid_of(first), keep=None, state="complete")),
        Ack(second, jid_of(second), end=_end(jid_of(second), value="ok", state="complete")),
    ]
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == []
    assert await redis.llen(keys.in_progress(ME)) == 0
    assert await redis.get(keys.status(jid_of(first))) == b"not a hash"
    assert await redis.hget(keys.status(jid_of(second)), "state") == b"complete"
    assert await redis.lindex(keys.result(jid_of(second)), 0) is not None


async def test_a_plain_batch_sends_no_ends_block(keys: Keys) -> None:
    raw = make_job()
    assert commands._end_args(keys, [Ack(raw, jid_of(raw)), Ack(raw, jid_of(raw))]) == []


async def test_a_working_write_lands_unless_this_runs_end_is_there(
    redis: Redis, keys: Keys
) -> None:
    """``Start`` rides a fetch on any connection: landing after its run's end (or
    retry) it is skipped; a later run's start is written over an older end."""
    ended, fresh, rerun = (keys.status(j) for j in ("ended", "fresh", "rerun"))
    await redis.hset(ended, mapping={"state": "complete", "updated_at": "200.5"})
    await redis.hset(fresh, mapping={"state": "queued", "updated_at": "300"})
    await redis.hset(rerun, mapping={"state": "dead", "updated_at": "100"})
    working = {"state": "working", "started_at": 200.0}
    starts = [
        Start("ended", working, 200.0, 600),
        Start("fresh", working, 200.0, 600),
        Start("rerun", working, 200.0, 600),
    ]
    result = await commands.fetch(
        redis, keys, identity=ME, queues=["q"], want=0, acks=[], reliable=True, starts=starts
    )
    assert result.end_failures == []
    assert await redis.hget(ended, "state") == b"complete"
    assert await redis.hget(fresh, "state") == b"working"  # a client's queued: not an end
    assert await redis.hget(rerun, "state") == b"working"
    assert await redis.hget(rerun, "started_at") == b"200.0"
    assert 0 < await redis.ttl(rerun) <= 600


async def test_a_failed_working_write_is_returned(redis: Redis, keys: Keys) -> None:
    await redis.set(keys.status("bad"), "not a hash")
    working = {"state": "working"}
    result = await commands.fetch(
        redis,
        keys,
        identity=ME,
        queues=["q"],
        want=0,
        acks=[],
        reliable=True,
        starts=[Start("bad", working, 1.0, 600)],
    )
    [(key, error)] = result.end_failures
    assert key == keys.status("bad")
    assert "WRONGTYPE" in error


async def test_a_rerun_result_replaces_the_one_kept_and_any_key_of_another_type(
    redis: Redis, keys: Keys
) -> None:
    """One element, the newest: pushed without a DEL first, so an older result is
    trimmed off and a key of another type replaced (as the DEL then RPUSH did)."""
    again, odd = await _fetched(redis, keys, 2)
    await redis.rpush(keys.result(jid_of(again)), b"older", b"oldest")
    await redis.set(keys.result(jid_of(odd)), "not a list")
    acks = [
        Ack(again, jid_of(again), end=_end(jid_of(again), value="new")),
        Ack(odd, jid_of(odd), end=_end(jid_of(odd), value="also new")),
    ]
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == []
    for raw, value in ((again, "new"), (odd, "also new")):
        kept = await redis.lrange(keys.result(jid_of(raw)), 0, -1)
        assert [orjson.loads(envelope)["value"] for envelope in kept] == [value]
        assert 60 < await redis.ttl(keys.result(jid_of(raw))) <= 120


async def test_only_the_channels_somebody_listens_to_are_published(
    redis: Redis, keys: Keys
) -> None:
    """The word to waiters is coalesced: one PUBSUB NUMSUB per call, a PUBLISH only
    where a subscriber is (a subscriber hears it; nobody else costs a command)."""
    heard, unheard, ended = await _fetched(redis, keys, 3)
    pubsub = redis.pubsub()
    await pubsub.subscribe(keys.result_ready(jid_of(heard)), keys.result_ready(jid_of(ended)))
    await redis.config_resetstat()
    acks = [
        Ack(heard, jid_of(heard), end=_end(jid_of(heard), value=1)),
        Ack(unheard, jid_of(unheard), end=_end(jid_of(unheard), value=2)),
        Ack(ended, jid_of(ended), end=_end(jid_of(ended), keep=None, state="complete")),
    ]
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == []
    stats = await redis.info("commandstats")
    assert stats["cmdstat_publish"]["calls"] == 2
    # Redis 7 counts the subcommand, 6.2 the command.
    assert stats.get("cmdstat_pubsub|numsub", stats.get("cmdstat_pubsub"))["calls"] == 1
    channels = set()
    for _ in range(50):  # a subscription's confirmation reads as None here
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
        if message is not None:
            channels.add(message["channel"])
        if len(channels) == 2:
            break
    assert channels == {
        keys.result_ready(jid_of(heard)).encode(),
        keys.result_ready(jid_of(ended)).encode(),
    }
    await pubsub.aclose()


async def test_a_user_refused_pubsub_still_publishes_every_end(
    redis_server: EmbeddedRedis, redis: Redis, keys: Keys
) -> None:
    """An ACL without PUBSUB (PUBLISH allowed) costs the coalescing, not the ack:
    every channel is published, as before it."""
    heard, unheard = await _fetched(redis, keys, 2)
    user, password = f"nonumsub{uuid.uuid4().hex[:6]}", "pw"
    await redis.acl_setuser(
        user,
        enabled=True,
        passwords=[f"+{password}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-pubsub"],
    )
    pubsub = redis.pubsub()
    await pubsub.subscribe(keys.result_ready(jid_of(heard)))
    limited = Redis.from_url(redis_server.url, username=user, password=password)
    acks = [
        Ack(heard, jid_of(heard), end=_end(jid_of(heard), value=1)),
        Ack(unheard, jid_of(unheard), end=_end(jid_of(unheard), value=2)),
    ]
    try:
        await redis.config_resetstat()
        assert await commands.ack(limited, keys, identity=ME, acks=acks) == []
    finally:
        await limited.aclose()
        await redis.acl_deluser(user)
    assert (await redis.info("commandstats"))["cmdstat_publish"]["calls"] == 2
    assert await redis.llen(keys.in_progress(ME)) == 0
    message = None
    for _ in range(20):
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
        if message is not None:
            break
    assert message is not None
    assert message["channel"] == keys.result_ready(jid_of(heard)).encode()
    await pubsub.aclose()
