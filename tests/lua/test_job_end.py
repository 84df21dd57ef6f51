"""includes/job_end.lua through the scripts that end a job without its processor:
bury_orphan (ProcessDied), kill_entry (an operator's kill) and drop_jobs (an
operator's delete). A tracked job's status says how it ended and its result
waiters get the failure envelope (and the channel's word), in the same step; a
plain job gets no key; an end already recorded is never overwritten; the dead
set's deletions record nothing (those jobs had ended already)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.client.results import RESULT_GONE_FOR
from cogworker_async.keys import Keys
from cogworker_async.store import admin, locks, orphans
from cogworker_async.timing import MAX_DURATION
from tests.lua.support import jid_of, make_job

pytestmark = pytest.mark.anyio


async def _tracked(redis: Redis, keys: Keys, state: str = "retrying", **extra: Any) -> bytes:
    raw = make_job(keep_result=30, status=True, **extra)
    await redis.hset(keys.status(jid_of(raw)), mapping={"state": state, "class": "tests.job"})
    await redis.expire(keys.status(jid_of(raw)), 500)
    return raw


async def _ended(redis: Redis, keys: Keys, raw: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    jid = jid_of(raw)
    status = {k.decode(): v.decode() for k, v in (await redis.hgetall(keys.status(jid))).items()}
    envelope = orjson.loads(await redis.lindex(keys.result(jid), 0) or b"null")
    return status, envelope


async def _ended_result(redis: Redis, keys: Keys, raw: bytes) -> tuple[None, dict[str, Any]]:
    return None, orjson.loads(await redis.lindex(keys.result(jid_of(raw)), 0) or b"null")


async def test_bury_orphan_tells_status_and_waiters_process_died(redis: Redis, keys: Keys) -> None:
    raw = await _tracked(redis, keys, state="working")
    dead = orjson.dumps(
        {**orjson.loads(raw), "error_class": "ProcessDied", "error_message": "died 4 times"}
    )
    await redis.rpush(keys.repeat_orphans, raw)
    async with redis.pubsub() as pubsub:
        await pubsub.subscribe(keys.result_ready(jid_of(raw)))
        assert await orphans.bury_orphan(redis, keys, raw=raw, jid=jid_of(raw), dead_entry=dead)
        with anyio.fail_after(10):
            while (message := await pubsub.get_message(True, timeout=1)) is None:
                pass
    assert message["type"] == "message"
    status, envelope = await _ended(redis, keys, raw)
    assert (status["state"], status["error_class"]) == ("dead", "ProcessDied")
    assert status["error_message"] == "died 4 times"
    assert float(status["finished_at"]) > 0
    assert 400 < await redis.ttl(keys.status(jid_of(raw))) <= 500  # its TTL kept
    assert envelope == {"ok": False, "error_class": "ProcessDied", "error_message": "died 4 times"}
    assert 0 < await redis.ttl(keys.result(jid_of(raw))) <= 30
    assert 30 < await redis.ttl(keys.result_gone(jid_of(raw))) <= 60


async def test_kill_entry_tells_status_and_waiters_job_killed(redis: Redis, keys: Keys) -> None:
    raw = await _tracked(redis, keys)
    await redis.zadd(keys.retry, {raw: 1.0})
    assert await admin.kill_entry(
        redis,
        keys,
        source=keys.retry,
        entry=raw,
        dead_entry=raw,
        now=time.time(),
        dead_max_jobs=100,
        dead_timeout=3600.0,
    )
    status, envelope = await _ended(redis, keys, raw)
    assert (status["state"], status["error_class"]) == ("dead", "JobKilled")
    assert envelope["error_class"] == "JobKilled"


@pytest.mark.parametrize("how", ["zrem", "zpop", "rpop"])
async def test_drop_jobs_tells_status_and_waiters_job_deleted(
    redis: Redis, keys: Keys, how: str
) -> None:
    raw = await _tracked(redis, keys, state="scheduled")
    plain = make_job()
    if how == "rpop":
        await redis.rpush(keys.queue("default"), raw, plain)
        removed = await locks.drop_jobs(
            redis,
            keys.queue("default"),
            pop=2,
            kind="list",
            tracking_prefix=keys.tracking_prefix,
            kinds=holds.kinds_table(keys),
        )
    else:
        await redis.zadd(keys.schedule, {raw: 1.0, plain: 2.0})
        given: dict[str, Any] = {"entries": [raw, plain]} if how == "zrem" else {"pop": 2}
        removed = await locks.drop_jobs(
            redis,
            keys.schedule,
            tracking_prefix=keys.tracking_prefix,
            kinds=holds.kinds_table(keys),
            **given,
        )
    assert removed == 2
    status, envelope = await _ended(redis, keys, raw)
    assert (status["state"], status["error_class"]) == ("failed", "JobDeleted")
    assert envelope == {
        "ok": False,
        "error_class": "JobDeleted",
        "error_message": "deleted by an operator",
    }
    # The plain job made no key at all.
    assert not await redis.exists(keys.status(jid_of(plain)), keys.result(jid_of(plain)))


async def test_an_end_already_recorded_is_never_overwritten(redis: Redis, keys: Keys) -> None:
    done = await _tracked(redis, keys, state="complete")
    await redis.rpush(keys.result(jid_of(done)), b'{"ok":true,"value":1}')
    dead = await _tracked(redis, keys, state="dead")
    await redis.zadd(keys.schedule, {done: 1.0})
    await redis.zadd(keys.dead, {dead: 1.0})
    await locks.drop_jobs(
        redis,
        keys.schedule,
        pop=1,
        tracking_prefix=keys.tracking_prefix,
        kinds=holds.kinds_table(keys),
    )
    # From the dead set: the caller (api.sets) passes no tracking prefix.
    await locks.drop_jobs(redis, keys.dead, pop=1, kinds=holds.kinds_table(keys))
    status, envelope = await _ended(redis, keys, done)
    assert status["state"] == "complete"
    assert envelope == {"ok": True, "value": 1}
    status, envelope = await _ended(redis, keys, dead)
    assert status["state"] == "dead"
    assert envelope is None


async def test_a_bad_status_key_never_stops_the_move(redis: Redis, keys: Keys) -> None:
    raw = make_job(keep_result=30)
    await redis.set(keys.status(jid_of(raw)), b"not a hash")
    await redis.zadd(keys.retry, {raw: 1.0})
    assert await admin.kill_entry(
        redis,
        keys,
        source=keys.retry,
        entry=raw,
        dead_entry=raw,
        now=time.time(),
        dead_max_jobs=100,
        dead_timeout=3600.0,
    )
    assert await redis.zcard(keys.dead) == 1
    assert await redis.get(keys.status(jid_of(raw))) == b"not a hash"  # left for a human
    _, envelope = await _ended_result(redis, keys, raw)
    assert envelope["error_class"] == "JobKilled"  # the waiters still hear of it


def test_the_include_uses_the_python_maxima() -> None:
    """job_end.lua clamps keep_result and the marker as timing/results do."""
    source = (Path(__file__).parents[2] / "lua_scripts/includes/job_end.lua").read_text()
    assert f"local job_end_max_duration = {int(MAX_DURATION)}" in source
    assert f"local job_end_gone_max = {RESULT_GONE_FOR}" in source
