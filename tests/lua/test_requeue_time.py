"""requeue.lua judges liveness on Redis's clock, and on the caller's only if TIME is refused."""

from __future__ import annotations

import uuid

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.embedded import EmbeddedRedis
from cogworker_async.keys import Keys
from cogworker_async.store.scripts import script
from tests.lua.support import JUDGE, JUDGE_TTL, make_job, trust_judge

pytestmark = pytest.mark.anyio

OWNER = "owner:1:ccc"


async def run_requeue(redis: Redis, keys: Keys, clock: float) -> list[object]:
    config = {
        "identity": OWNER,
        "threshold": 30,
        "clock": clock,
        "queue_prefix": keys.queue_prefix,
        "wakeup_prefix": keys.wakeup_prefix,
        "default_queue": "default",
        "counter_prefix": keys.orphanings_prefix,
        "counter_ttl": 60,
        "max_orphanings": 3,
        "live_window": 10,
        "judge": JUDGE,
        "judge_ttl": JUDGE_TTL,
    }
    script_keys = [
        keys.in_progress(OWNER),
        keys.process(OWNER),
        keys.last_beat,
        keys.repeat_orphans,
        keys.dead,
        keys.queues,
        keys.live_queues,
        keys.beating_since,
        keys.processes,
        keys.workers(OWNER),
        keys.in_progress_identities,
    ]
    reply = await script("requeue").run(redis, script_keys, [orjson.dumps(config)])
    return list(reply)


async def seed(redis: Redis, keys: Keys) -> None:
    await redis.lpush(keys.in_progress(OWNER), make_job())
    # A beat at epoch 9,990: ten seconds before the caller's fake clock of 10,000,
    # and decades before Redis's own clock.
    await redis.hset(keys.last_beat, OWNER, "9990")
    # A judge trusted on Redis's clock, whose stamps on the caller's fake clock
    # would be in the future (so not fresh): only one clock can make it trusted.
    await trust_judge(redis, keys)


async def test_redis_clock_decides_when_time_is_allowed(redis: Redis, keys: Keys) -> None:
    await seed(redis, keys)
    reply = await run_requeue(redis, keys, clock=10_000)
    assert reply[0] == 1  # dead on Redis's clock: moved


async def test_caller_clock_decides_when_time_is_refused(
    redis_server: EmbeddedRedis, redis: Redis, keys: Keys
) -> None:
    await seed(redis, keys)
    user, password = f"notime{uuid.uuid4().hex[:6]}", "pw"
    await redis.acl_setuser(
        user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all", "-time"]
    )
    limited = Redis.from_url(redis_server.url, username=user, password=password)
    try:
        reply = await run_requeue(limited, keys, clock=10_000)
    finally:
        await limited.aclose()
        await redis.acl_deluser(user)
    assert reply[:3] == [-1, 0, 0]  # alive on the caller's clock: nothing touched
    assert await redis.llen(keys.in_progress(OWNER)) == 1
