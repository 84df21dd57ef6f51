"""Who may judge a process dead (requeue.lua), the beat runs that decide it
(heartbeat.lua), and the registries a dead or leaving process leaves behind."""

from __future__ import annotations

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import orphans
from cogworker_async.store.scripts import script
from tests.lua.support import JUDGE, drain, make_job, redis_now

pytestmark = pytest.mark.anyio

DEAD = "host:9:dead"
ME = "host:8:me"
THRESHOLD = 10.0
TTL = 2.0


async def beat(redis: Redis, keys: Keys, identity: str) -> float:
    payload = {
        "identity": identity,
        "info": "{}",
        "ttl_ms": int(TTL * 1000),
        "clock": 1.0,
        "queues": [],
        "workers": {},
        "reliable": True,
    }
    beat_keys = [
        keys.process(identity),
        keys.last_beat,
        keys.in_progress_identities,
        keys.live_queues,
        keys.workers(identity),
        keys.processes,
        keys.signals(identity),
        keys.beating_since,
    ]
    reply = await script("heartbeat").run(redis, beat_keys, [orjson.dumps(payload)])
    return float(reply[0])


async def since(redis: Redis, keys: Keys, identity: str) -> float:
    return float(await redis.hget(keys.beating_since, identity) or "nan")


async def recover(redis: Redis, keys: Keys) -> orphans.RequeueResult:
    return await orphans.requeue(
        redis,
        keys,
        identity=DEAD,
        threshold=THRESHOLD,
        default_queue="default",
        max_orphanings=3,
        live_window=60.0,
        judge=JUDGE,
        judge_ttl=TTL,
    )


async def plant_dead(redis: Redis, keys: Keys, *, jobs: int = 1) -> None:
    """A process that died long ago, on every registry, with ``jobs`` on its list."""
    now = await redis_now(redis)
    for _ in range(jobs):
        await redis.lpush(keys.in_progress(DEAD), make_job())
    await redis.hset(keys.last_beat, DEAD, f"{now - 1000:.6f}")
    await redis.hset(keys.beating_since, DEAD, f"{now - 2000:.6f}")
    await redis.sadd(keys.in_progress_identities, DEAD)
    await redis.sadd(keys.processes, DEAD)
    await redis.hset(keys.workers(DEAD), "0", "{}")


async def judge_beats(redis: Redis, keys: Keys, *, last_ago: float, run: float) -> None:
    now = await redis_now(redis)
    await redis.hset(keys.last_beat, JUDGE, f"{now - last_ago:.6f}")
    await redis.hset(keys.beating_since, JUDGE, f"{now - run:.6f}")


# --- beat runs ------------------------------------------------------------------------


async def test_first_beat_starts_a_run_and_later_beats_extend_it(redis: Redis, keys: Keys) -> None:
    first = await beat(redis, keys, ME)
    assert await since(redis, keys, ME) == pytest.approx(first, abs=1e-6)
    second = await beat(redis, keys, ME)
    assert second >= first
    assert await since(redis, keys, ME) == pytest.approx(first, abs=1e-6)


@pytest.mark.parametrize(
    ("case", "previous_ago"),
    [
        # What an outage, an old snapshot or refused writes look like from Redis.
        ("a gap longer than the ttl", TTL + 1),
        ("a clock that went back", -100.0),
    ],
)
async def test_a_break_starts_the_run_again(
    redis: Redis, keys: Keys, case: str, previous_ago: float
) -> None:
    now = await redis_now(redis)
    await redis.hset(keys.last_beat, ME, f"{now - previous_ago:.6f}")
    await redis.hset(keys.beating_since, ME, f"{now - 5000:.6f}")
    stamp = await beat(redis, keys, ME)
    assert await since(redis, keys, ME) == pytest.approx(stamp, abs=1e-6), case


async def test_a_corrupt_run_start_starts_the_run_again(redis: Redis, keys: Keys) -> None:
    await beat(redis, keys, ME)
    await redis.hset(keys.beating_since, ME, "garbage")
    stamp = await beat(redis, keys, ME)
    assert await since(redis, keys, ME) == pytest.approx(stamp, abs=1e-6)


# --- who may judge --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "last_ago", "run"),
    [
        ("run shorter than the threshold (just back from an outage)", 0.1, THRESHOLD - 1),
        ("own last beat not fresh (cannot beat: OOM, cut off)", TTL + 1, 5000.0),
        ("own last beat in the future (clock went back)", -100.0, 5000.0),
    ],
)
async def test_an_untrusted_judge_judges_nobody(
    redis: Redis, keys: Keys, case: str, last_ago: float, run: float
) -> None:
    await plant_dead(redis, keys)
    await judge_beats(redis, keys, last_ago=last_ago, run=run)
    result = await recover(redis, keys)
    assert result.untrusted, case
    assert result.moved == 0
    assert await redis.llen(keys.in_progress(DEAD)) == 1
    assert await redis.sismember(keys.processes, DEAD)


async def test_a_judge_that_never_beat_judges_nobody(redis: Redis, keys: Keys) -> None:
    await plant_dead(redis, keys)
    result = await recover(redis, keys)
    assert result.untrusted
    assert await redis.llen(keys.in_progress(DEAD)) == 1


async def test_a_trusted_judge_recovers_and_the_dead_leave_every_registry(
    redis: Redis, keys: Keys
) -> None:
    await plant_dead(redis, keys, jobs=2)
    await judge_beats(redis, keys, last_ago=0.1, run=THRESHOLD + 1)
    result = await recover(redis, keys)
    assert (result.untrusted, result.alive, result.moved) == (False, False, 2)
    assert len(await drain(redis, keys.queue("default"))) == 2
    assert not await redis.sismember(keys.processes, DEAD)
    assert not await redis.sismember(keys.in_progress_identities, DEAD)
    assert await redis.hget(keys.last_beat, DEAD) is None
    assert await redis.hget(keys.beating_since, DEAD) is None
    assert not await redis.exists(keys.workers(DEAD))
    assert await redis.hget(keys.last_beat, JUDGE) is not None  # the judge stays


async def test_a_dead_process_with_no_list_leaves_the_registries(redis: Redis, keys: Keys) -> None:
    await plant_dead(redis, keys, jobs=0)
    await judge_beats(redis, keys, last_ago=0.1, run=THRESHOLD + 1)
    assert (await recover(redis, keys)).moved == 0
    assert not await redis.sismember(keys.processes, DEAD)
    assert await redis.hget(keys.last_beat, DEAD) is None


async def test_a_job_that_could_not_move_keeps_the_registries(redis: Redis, keys: Keys) -> None:
    await plant_dead(redis, keys)
    await redis.set(keys.queue("default"), "wrong type")
    await judge_beats(redis, keys, last_ago=0.1, run=THRESHOLD + 1)
    result = await recover(redis, keys)
    assert result.failed == 1
    assert await redis.sismember(keys.in_progress_identities, DEAD)
    assert await redis.hget(keys.last_beat, DEAD) is not None


async def test_the_alive_are_alive_whoever_asks(redis: Redis, keys: Keys) -> None:
    """Presence decides before the judge's own standing is even looked at."""
    await beat(redis, keys, DEAD)
    await redis.lpush(keys.in_progress(DEAD), make_job())
    assert (await recover(redis, keys)).alive


# --- leaving ------------------------------------------------------------------------------


async def deregister(redis: Redis, keys: Keys) -> int:
    dereg_keys = [
        keys.process(ME),
        keys.workers(ME),
        keys.processes,
        keys.in_progress(ME),
        keys.last_beat,
        keys.beating_since,
        keys.in_progress_identities,
    ]
    return int(await script("deregister").run(redis, dereg_keys, [ME]))


async def test_leaving_with_an_empty_list_removes_everything(redis: Redis, keys: Keys) -> None:
    await beat(redis, keys, ME)
    assert await deregister(redis, keys) == 1
    assert not await redis.exists(keys.process(ME), keys.workers(ME))
    assert not await redis.sismember(keys.processes, ME)
    assert not await redis.sismember(keys.in_progress_identities, ME)
    assert await redis.hget(keys.last_beat, ME) is None
    assert await redis.hget(keys.beating_since, ME) is None


async def test_leaving_with_jobs_on_the_list_keeps_them_findable(redis: Redis, keys: Keys) -> None:
    await beat(redis, keys, ME)
    await redis.lpush(keys.in_progress(ME), make_job())
    assert await deregister(redis, keys) == 0
    assert not await redis.exists(keys.process(ME))
    assert not await redis.sismember(keys.processes, ME)
    assert await redis.sismember(keys.in_progress_identities, ME)
    assert await redis.hget(keys.last_beat, ME) is not None
