"""The reconciler's stray judgement: two looks, and never while a fetch that saw it is out."""

from __future__ import annotations

import logging
import time

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.worker.reconcile import Reconciler

pytestmark = pytest.mark.anyio

ME = "host:1:me"


class NoSettlements:
    """The settler's side of a pass: nothing pending here."""

    async def settle_pending(self) -> int:
        return 0

    async def flush_counters(self) -> None:
        return None


def _job(jid: str) -> bytes:
    return orjson.dumps({"jid": jid, "class": "x", "queue": "default", "args": []})


def _reconciler(
    redis: Redis, keys: Keys, known: list[bytes], out_since: list[float | None]
) -> Reconciler:
    return Reconciler(
        redis,
        keys,
        NoSettlements(),  # type: ignore[arg-type]
        identity=ME,
        default_queue="default",
        known=lambda: known,
        fetching_since=lambda: out_since[0],
        reliable=lambda: True,
        logger=logging.getLogger("test.reconcile"),
    )


async def test_a_stray_is_requeued_on_the_second_look_only(redis: Redis, keys: Keys) -> None:
    stray, mine = _job("a" * 24), _job("b" * 24)
    await redis.lpush(keys.in_progress(ME), stray, mine)
    reconciler = _reconciler(redis, keys, [mine], [None])
    await reconciler.once()
    assert reconciler.strays_requeued == 0
    assert await redis.llen(keys.in_progress(ME)) == 2
    await reconciler.once()
    assert reconciler.strays_requeued == 1
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [mine]
    assert await redis.lrange(keys.queue("default"), 0, -1) == [stray]


async def test_no_judgement_while_a_fetch_out_since_the_last_look_may_bring_it(
    redis: Redis, keys: Keys
) -> None:
    # A fetch moved the job onto our list and its reply is slow to come: the
    # job is in no processor's hands yet, and must not be run twice.
    moved = _job("c" * 24)
    await redis.lpush(keys.in_progress(ME), moved)
    out_since: list[float | None] = [time.monotonic()]
    reconciler = _reconciler(redis, keys, [], out_since)
    for _ in range(3):
        await reconciler.once()
    assert reconciler.strays_requeued == 0
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [moved]
    # The call came back (it failed: the job stayed unknown). Seen at the last
    # look and now, with nothing out since before that look: a stray.
    out_since[0] = None
    await reconciler.once()
    assert reconciler.strays_requeued == 1
    assert await redis.lrange(keys.queue("default"), 0, -1) == [moved]


async def test_a_fetch_sent_after_the_last_look_does_not_hold_judgement(
    redis: Redis, keys: Keys
) -> None:
    stray = _job("d" * 24)
    await redis.lpush(keys.in_progress(ME), stray)
    out_since: list[float | None] = [None]
    reconciler = _reconciler(redis, keys, [], out_since)
    await reconciler.once()
    out_since[0] = time.monotonic()  # out now, but sent after the look that saw it
    await reconciler.once()
    assert reconciler.strays_requeued == 1
