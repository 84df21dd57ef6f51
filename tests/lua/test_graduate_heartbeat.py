"""graduate.lua (due schedule/retry entries onto queues), heartbeat.lua, and NOSCRIPT."""

from __future__ import annotations

import time

import orjson
import pytest
import redis as sync_redis
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands, orphans
from cogworker_async.store.commands import GraduateResult, Graduation
from cogworker_async.store.scripts import script
from tests.lua.support import drain, make_job, redis_now

pytestmark = pytest.mark.anyio


def _graduation(entry: bytes, queue: str) -> Graduation:
    payload = orjson.dumps({**orjson.loads(entry), "enqueued_at": time.time()})
    return Graduation(entry=entry, payload=payload, queue=queue)


# --- graduate.lua -------------------------------------------------------------------


async def test_graduate_moves_entries(redis: Redis, keys: Keys) -> None:
    e1, e2 = make_job("q1"), make_job("q2")
    await redis.zadd(keys.schedule, {e1: 1.0, e2: 2.0})
    items = [_graduation(e1, "q1"), _graduation(e2, "q2")]
    result = await commands.graduate(redis, keys, source=keys.schedule, items=items, defer=60)
    assert result == GraduateResult(2, [])
    assert await redis.exists(keys.schedule) == 0
    # The new payload is pushed, not the old entry.
    assert await redis.lrange(keys.queue("q1"), 0, -1) == [items[0].payload]
    assert await redis.lrange(keys.queue("q2"), 0, -1) == [items[1].payload]
    assert await redis.smembers(keys.queues) == {b"q1", b"q2"}
    assert await redis.zscore(keys.wakeup("q1"), "1") == 0
    assert await redis.zscore(keys.wakeup("q2"), "1") == 0


async def test_graduate_oldest_first_on_one_queue(redis: Redis, keys: Keys) -> None:
    entries = [make_job("q") for _ in range(3)]
    await redis.zadd(keys.retry, {e: float(i) for i, e in enumerate(entries)})
    items = [_graduation(e, "q") for e in entries]
    result = await commands.graduate(redis, keys, source=keys.retry, items=items, defer=60)
    assert result.moved == 3
    assert await drain(redis, keys.queue("q")) == [i.payload for i in items]


async def test_graduate_defers_unpushable_entry(redis: Redis, keys: Keys) -> None:
    bad, good = make_job("bad"), make_job("good")
    await redis.zadd(keys.schedule, {bad: 1.0, good: 2.0})
    await redis.set(keys.queue("bad"), "not a list")
    before = time.time()
    items = [_graduation(bad, "bad"), _graduation(good, "good")]
    result = await commands.graduate(redis, keys, source=keys.schedule, items=items, defer=30)
    after = time.time()
    assert result == GraduateResult(1, ["bad"])
    score = await redis.zscore(keys.schedule, bad)
    assert score is not None
    assert before + 30 <= score <= after + 30
    assert await redis.zcard(keys.schedule) == 1
    assert await redis.lrange(keys.queue("good"), 0, -1) == [items[1].payload]
    assert await redis.get(keys.queue("bad")) == b"not a list"
    assert await redis.smembers(keys.queues) == {b"good"}


async def test_graduate_entry_already_gone_not_counted(redis: Redis, keys: Keys) -> None:
    gone, present = make_job("q"), make_job("q")
    await redis.zadd(keys.schedule, {present: 1.0})
    items = [_graduation(gone, "q"), _graduation(present, "q")]
    result = await commands.graduate(redis, keys, source=keys.schedule, items=items, defer=60)
    assert result == GraduateResult(1, [])
    assert await redis.lrange(keys.queue("q"), 0, -1) == [items[1].payload]


async def test_graduate_nothing(redis: Redis, keys: Keys) -> None:
    result = await commands.graduate(redis, keys, source=keys.schedule, items=[], defer=60)
    assert result == GraduateResult(0, [])
    assert await redis.exists(keys.queues) == 0


async def test_graduate_wrong_type_marker_still_moves(redis: Redis, keys: Keys) -> None:
    entry = make_job("q")
    await redis.zadd(keys.schedule, {entry: 1.0})
    await redis.set(keys.wakeup("q"), "not a sorted set")
    items = [_graduation(entry, "q")]
    result = await commands.graduate(redis, keys, source=keys.schedule, items=items, defer=60)
    assert result.moved == 1
    assert await redis.lrange(keys.queue("q"), 0, -1) == [items[0].payload]
    assert await redis.exists(keys.schedule) == 0


# --- heartbeat.lua --------------------------------------------------------------------

IDENTITY = "host:5:beat"


def _heartbeat_keys(keys: Keys) -> list[str]:
    return [
        keys.process(IDENTITY),
        keys.last_beat,
        keys.in_progress_identities,
        keys.live_queues,
        keys.workers(IDENTITY),
        keys.processes,
        keys.signals(IDENTITY),
        keys.beating_since,
    ]


async def _beat(
    redis: Redis,
    keys: Keys,
    *,
    workers: dict[str, str],
    queues: list[str],
    reliable: bool = True,
    ttl_ms: int = 20_000,
) -> bytes:
    info = orjson.dumps({"hostname": "host", "pid": 5, "busy": len(workers)}).decode()
    beat = {
        "identity": IDENTITY,
        "info": info,
        "ttl_ms": ttl_ms,
        "clock": 1.0,  # a wrong host clock: Redis's TIME must win
        "queues": queues,
        "workers": workers,
        "reliable": reliable,
    }
    reply = await script("heartbeat").run(redis, _heartbeat_keys(keys), [orjson.dumps(beat)])
    stamp = reply[0]
    assert isinstance(stamp, bytes)
    return stamp


async def test_heartbeat_writes_everything(redis: Redis, keys: Keys) -> None:
    work = {"0": '{"jid":"a"}', "3": '{"jid":"b"}'}
    before = await redis_now(redis)
    stamp = await _beat(redis, keys, workers=work, queues=["mail", "default"])
    after = await redis_now(redis)

    presence = await redis.get(keys.process(IDENTITY))
    assert presence is not None
    assert orjson.loads(presence)["pid"] == 5
    assert 19_000 < await redis.pttl(keys.process(IDENTITY)) <= 20_000

    stored = await redis.hget(keys.last_beat, IDENTITY)
    assert stored == stamp
    assert before - 0.001 <= float(stamp) <= after + 0.001

    assert await redis.smembers(keys.in_progress_identities) == {IDENTITY.encode()}
    assert await redis.zcard(keys.live_queues) == 2
    for queue in ("mail", "default"):
        assert await redis.zscore(keys.live_queues, queue) == pytest.approx(float(stamp), abs=1e-5)

    assert await redis.hgetall(keys.workers(IDENTITY)) == {
        b"0": b'{"jid":"a"}',
        b"3": b'{"jid":"b"}',
    }
    assert 19_000 < await redis.pttl(keys.workers(IDENTITY)) <= 20_000
    assert await redis.smembers(keys.processes) == {IDENTITY.encode()}


async def test_heartbeat_replaces_workers_and_advances_stamp(redis: Redis, keys: Keys) -> None:
    first = await _beat(redis, keys, workers={"0": "x", "1": "y"}, queues=["q"])
    second = await _beat(redis, keys, workers={"1": "z"}, queues=["q"])
    assert float(second) >= float(first)
    assert await redis.hgetall(keys.workers(IDENTITY)) == {b"1": b"z"}
    assert await redis.hget(keys.last_beat, IDENTITY) == second
    assert await redis.zscore(keys.live_queues, "q") == pytest.approx(float(second), abs=1e-5)


async def test_heartbeat_idle_process(redis: Redis, keys: Keys) -> None:
    await _beat(redis, keys, workers={"0": "x"}, queues=["q"])
    await _beat(redis, keys, workers={}, queues=[])
    assert await redis.exists(keys.workers(IDENTITY)) == 0
    assert await redis.exists(keys.process(IDENTITY)) == 1


async def test_heartbeat_basic_mode_not_in_registry(redis: Redis, keys: Keys) -> None:
    await _beat(redis, keys, workers={}, queues=["q"], reliable=False)
    assert await redis.exists(keys.in_progress_identities) == 0
    assert await redis.smembers(keys.processes) == {IDENTITY.encode()}


async def test_heartbeat_ttl_is_milliseconds(redis: Redis, keys: Keys) -> None:
    await _beat(redis, keys, workers={"0": "x"}, queues=["q"], ttl_ms=1500)
    assert 1000 < await redis.pttl(keys.process(IDENTITY)) <= 1500
    assert 1000 < await redis.pttl(keys.workers(IDENTITY)) <= 1500


async def test_heartbeat_keeps_process_alive_for_recovery(redis: Redis, keys: Keys) -> None:
    job = make_job("q")
    await redis.lpush(keys.in_progress(IDENTITY), job)
    await _beat(redis, keys, workers={}, queues=["q"])
    result = await orphans.requeue(
        redis,
        keys,
        identity=IDENTITY,
        threshold=10,
        default_queue="default",
        max_orphanings=3,
        live_window=60,
    )
    assert result.alive
    # Presence gone, but the stamp is recent: still alive.
    await redis.delete(keys.process(IDENTITY))
    result = await orphans.requeue(
        redis,
        keys,
        identity=IDENTITY,
        threshold=10,
        default_queue="default",
        max_orphanings=3,
        live_window=60,
    )
    assert result.alive
    assert await redis.lrange(keys.in_progress(IDENTITY), 0, -1) == [job]


# --- NOSCRIPT ---------------------------------------------------------------------


async def test_script_run_survives_script_flush(redis: Redis, keys: Keys) -> None:
    bury = script("bury")
    await redis.zadd(keys.schedule, {b"e1": 1.0, b"e2": 2.0})
    args_keys = [keys.schedule, keys.dead, keys.stats_failed, keys.stats_failed + ":day"]
    assert await bury.run(redis, args_keys, [b"e1", b"d1", 1.0, 60]) == 1
    assert await redis.script_exists(bury.sha) == [True]
    await redis.script_flush()
    assert await redis.script_exists(bury.sha) == [False]
    assert await bury.run(redis, args_keys, [b"e2", b"d2", 2.0, 60]) == 1
    assert await redis.zrange(keys.dead, 0, -1) == [b"d1", b"d2"]
    # EVAL cached it again: the next call is back to EVALSHA.
    assert await redis.script_exists(bury.sha) == [True]


def test_script_run_sync_survives_script_flush(sync_client: sync_redis.Redis, keys: Keys) -> None:
    enqueue = script("enqueue")
    job = make_job("q")
    enqueue_keys = [keys.queue("q"), keys.queues, keys.wakeup("q")]
    sync_client.script_flush()
    assert enqueue.run_sync(sync_client, enqueue_keys, ["q", job]) == 1
    assert enqueue.run_sync(sync_client, enqueue_keys, ["q", job]) == 2
    assert sync_client.script_exists(enqueue.sha) == [True]


async def test_heartbeat_drains_signals(redis: Redis, keys: Keys) -> None:
    await redis.rpush(keys.signals(IDENTITY), "quiet", "stop")
    beat = {
        "identity": IDENTITY,
        "info": "{}",
        "ttl_ms": 5000,
        "clock": 1.0,
        "queues": ["default"],
        "workers": {},
        "reliable": True,
    }
    reply = await script("heartbeat").run(redis, _heartbeat_keys(keys), [orjson.dumps(beat)])
    assert reply[1:] == [b"quiet", b"stop"]
    assert await redis.exists(keys.signals(IDENTITY)) == 0


async def test_heartbeat_survives_a_wrong_typed_signals_key(redis: Redis, keys: Keys) -> None:
    await redis.set(keys.signals(IDENTITY), "junk")
    await _beat(redis, keys, workers={}, queues=["default"])
    assert await redis.get(keys.signals(IDENTITY)) == b"junk"
