"""Orphan recovery in a fleet (issue 26, item 1): its cost per process stays flat
as the fleet grows, and a dead process among hundreds of live ones is still found.

Simulated identities beat through the real heartbeat script (one ``Heartbeat``
whose identity is switched between beats, in a thread, like the real one);
every live identity runs the real recovery duty's ``pass_once`` once a round,
as each process does once per ``orphan_check_interval``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from redis.asyncio import ConnectionPool, Redis

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.worker.heartbeat import Heartbeat
from cogworker_async.worker.recovery import Recovery
from tests.conftest import FAST
from tests.helpers import wait_for
from tests.lua.support import make_job, redis_now

pytestmark = pytest.mark.anyio

LOG = logging.getLogger("test.fleet")


class CountingRedis(Redis):
    """Counts the commands this client sends: the recovery duty's, not the beats'."""

    sent = 0

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent += 1
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


class Beater:
    """``identities`` beating every heartbeat_interval through heartbeat.lua, in a thread."""

    def __init__(self, settings: Settings, keys: Keys, identities: list[str]) -> None:
        self.live = list(identities)
        self._interval = settings.heartbeat_interval
        self._stop = threading.Event()
        self._heartbeat = Heartbeat(
            settings,
            keys,
            identity=identities[0],
            queues=["default"],
            reliable=lambda: True,
            busy=dict,
            logger=LOG,
        )
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def beat_all(self) -> None:
        for identity in list(self.live):
            self._heartbeat.identity = identity
            self._heartbeat.beat_once()

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.beat_all()
            self._stop.wait(max(0.0, self._interval - (time.monotonic() - started)))

    def __enter__(self) -> Beater:
        self.beat_all()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._heartbeat.close()


async def recovery_commands_per_process(
    redis_url: str, namespace: str, live: int
) -> tuple[float, bool]:
    """Commands per process in one recovery round of ``live`` processes (one of
    them dead), and whether the dead one's job was requeued by that round."""
    # One thread beats every identity in turn: on a loaded machine a sweep of 200
    # took longer than FAST's 2 s TTL, every judge had a gap, and no process could
    # judge in the measured round. A TTL no sweep reaches keeps liveness out of it.
    lenient = {**FAST, "heartbeat_ttl": 4.0, "orphan_threshold": 5.5}
    settings = Settings(redis_url=redis_url, namespace=namespace, concurrency=1, **lenient)
    keys = Keys(namespace)
    pool = ConnectionPool.from_url(redis_url)
    client = CountingRedis(connection_pool=pool)
    identities = [f"sim:{i}" for i in range(live)]
    dead = identities.pop()
    job = make_job("default")
    await client.lpush(keys.in_progress(dead), job)
    try:
        with Beater(settings, keys, [*identities, dead]) as beater:
            beater.live.remove(dead)  # beat once, then died: its job is orphaned
            died_at = await redis_now(client)
            # Judges are trusted after orphan_threshold of unbroken beats; the
            # dead one is overdue after orphan_threshold without one.
            margin = settings.orphan_threshold + 0.5
            await wait_for(lambda: _after(client, died_at + margin), timeout=60)
            duties = [
                Recovery(client, keys, settings, identity=identity, logger=LOG)
                for identity in identities
            ]
            # A lease left by an earlier pass expires first: one round is one interval.
            await wait_for(lambda: _gone(client, keys.recovery_lock), timeout=30)
            client.sent = 0
            for duty in duties:
                await duty.pass_once()
            sent = client.sent
            requeued = (await client.llen(keys.in_progress(dead))) == 0 and job in (
                await client.lrange(keys.queue("default"), 0, -1)
            )
        return sent / len(identities), requeued
    finally:
        await client.aclose()
        await pool.disconnect()  # a pool passed in is not closed with its client


async def _after(redis: Redis, when: float) -> bool:
    return await redis_now(redis) > when


async def _gone(redis: Redis, key: str) -> bool:
    return not await redis.exists(key)


async def test_recovery_commands_per_process_do_not_grow_with_the_fleet(
    settings: Settings, namespace: str
) -> None:
    small, small_found = await recovery_commands_per_process(
        settings.redis_url, namespace + "s", 20
    )
    large, large_found = await recovery_commands_per_process(
        settings.redis_url, namespace + "l", 200
    )
    assert small_found, "the dead identity's job was not requeued in one round (20)"
    assert large_found, "the dead identity's job was not requeued in one round (200)"
    # One lease attempt each, plus one pass for the whole fleet that reads
    # only the overdue identity: flat (it was ~1 requeue call per identity,
    # per process: 21 vs 201).
    assert large <= 1.2 * small, f"{large:.2f} commands/process at 200 vs {small:.2f} at 20"
    assert large < 2, f"{large:.2f} commands per process per interval"


async def test_an_identity_missing_from_the_beats_index_is_still_judged(
    redis: Redis, keys: Keys, settings: Settings
) -> None:
    """A process of a version before the index (rolling deploy) that dies: it
    has a last_beat stamp and registry entries, no beats entry; still found."""
    judge = "new:1"
    heartbeat = Heartbeat(
        settings,
        keys,
        identity=judge,
        queues=["default"],
        reliable=lambda: True,
        busy=dict,
        logger=LOG,
    )
    try:
        heartbeat.beat_once()
        now = await redis_now(redis)
        # The judge has beaten without a break long enough (planted, as in test_judge).
        await redis.hset(keys.beating_since, judge, f"{now - 100:.6f}")
        old = "old:1"
        job = make_job("default")
        await redis.lpush(keys.in_progress(old), job)
        await redis.hset(keys.last_beat, old, f"{now - 100:.6f}")
        await redis.hset(keys.beating_since, old, f"{now - 200:.6f}")
        await redis.sadd(keys.in_progress_identities, old)
        await redis.sadd(keys.processes, old)
        moved = await Recovery(redis, keys, settings, identity=judge, logger=LOG).pass_once()
        assert moved == 1
        assert await redis.lrange(keys.queue("default"), 0, -1) == [job]
        assert not await redis.sismember(keys.processes, old)
    finally:
        heartbeat.close()
