"""Suspects: which recovered jobs requeue.lua marks, and how fetch.lua takes them.

A job is isolated only once it has been orphaned before: the first recovery
after a crash requeues it plainly (most crashes take innocent jobs down
together), the next one marks it. A mark counts only beside the job's orphan
counter, which only requeue.lua writes: a producer can forge the text, not the
counter.
"""

from __future__ import annotations

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands, orphans
from cogworker_async.worker.suspects import SUSPECT_PREFIX
from tests.lua.support import (
    JUDGE_TTL,
    drain,
    enqueue,
    jid_of,
    make_job,
    make_suspect,
    trust_judge,
)

pytestmark = pytest.mark.anyio

DEAD = "dead:1:aaa"
ME = "me:1:bbb"


async def recover(
    redis: Redis, keys: Keys, *jobs: bytes, max_orphanings: int = 5
) -> orphans.RequeueResult:
    await redis.lpush(keys.in_progress(DEAD), *jobs)
    return await orphans.requeue(
        redis,
        keys,
        identity=DEAD,
        threshold=0.0,
        default_queue="default",
        max_orphanings=max_orphanings,
        live_window=10.0,
        judge=await trust_judge(redis, keys),
        judge_ttl=JUDGE_TTL,
    )


async def counter(redis: Redis, keys: Keys, job: bytes) -> bytes | None:
    value = await redis.get(keys.orphanings(jid_of(job)))
    assert value is None or isinstance(value, bytes)
    return value


# --- requeue.lua: who is marked ------------------------------------------------


async def test_first_recovery_requeues_plainly_and_counts(redis: Redis, keys: Keys) -> None:
    job = make_job()
    assert (await recover(redis, keys, job)).moved == 1
    assert await drain(redis, keys.queue("default")) == [job]  # byte for byte, no mark
    assert await counter(redis, keys, job) == b"1"


async def test_second_recovery_marks_and_leaves_every_other_byte(redis: Redis, keys: Keys) -> None:
    original = (
        b'{"jid": "x1",  "class":"t", "args":[1.5e300, 12345678901234567890], "queue":"default"}'
    )
    await recover(redis, keys, original)
    (once,) = await drain(redis, keys.queue("default"))
    assert once == original
    await recover(redis, keys, once)
    (marked,) = await drain(redis, keys.queue("default"))
    assert marked.startswith(SUSPECT_PREFIX)
    assert marked == b'{"suspect":1,' + original[1:]  # every other byte as written
    assert orjson.loads(marked)["suspect"] == 1
    assert await redis.get(keys.orphanings("x1")) == b"2"


async def test_a_third_recovery_does_not_mark_twice(redis: Redis, keys: Keys) -> None:
    job = make_job()
    await redis.set(keys.orphanings(jid_of(job)), 1)
    await recover(redis, keys, job)
    (once,) = await drain(redis, keys.queue("default"))
    await recover(redis, keys, once)
    (twice,) = await drain(redis, keys.queue("default"))
    assert twice == once == b'{"suspect":1,' + job[1:]
    assert await counter(redis, keys, job) == b"3"


async def test_last_chance_before_parking_is_marked(redis: Redis, keys: Keys) -> None:
    """max_orphanings=1: the next orphaning parks it, so its one more run is alone."""
    job = make_job()
    await recover(redis, keys, job, max_orphanings=1)
    assert await drain(redis, keys.queue("default")) == [b'{"suspect":1,' + job[1:]]


async def test_payloads_without_a_jid_are_never_marked(redis: Redis, keys: Keys) -> None:
    await recover(redis, keys, b"{ }", b"not json")
    await recover(redis, keys, *await drain(redis, keys.queue("default")))
    assert set(await drain(redis, keys.queue("default"))) == {b"{ }", b"not json"}


async def test_own_shutdown_requeue_marks_nothing(redis: Redis, keys: Keys) -> None:
    job = make_job()
    await redis.set(keys.orphanings(jid_of(job)), 2)
    await redis.lpush(keys.in_progress(ME), job)
    result = await orphans.requeue(
        redis,
        keys,
        identity=ME,
        threshold=None,
        default_queue="default",
        max_orphanings=5,
        live_window=10.0,
    )
    assert result.moved == 1
    assert await drain(redis, keys.queue("default")) == [job]


# --- fetch.lua: how suspects are taken --------------------------------------------


async def _fetch(
    redis: Redis, keys: Keys, want: int, queues: list[str] | None = None, *, suspects: bool = True
) -> list[bytes]:
    result = await commands.fetch(
        redis,
        keys,
        identity=ME,
        queues=queues or ["default"],
        want=want,
        acks=[],
        reliable=True,
        suspects=suspects,
    )
    return result.jobs


async def real_suspect(redis: Redis, keys: Keys, queue: str = "default") -> bytes:
    """A suspect as requeue.lua leaves one: marked, its orphan counter at 2."""
    suspect = make_suspect(queue)
    await redis.set(keys.orphanings(jid_of(suspect)), 2)
    return suspect


async def test_a_suspect_is_always_alone_in_its_batch(redis: Redis, keys: Keys) -> None:
    first, later = make_job(), make_job()
    suspect = await real_suspect(redis, keys)
    await enqueue(redis, keys, "default", first, suspect, later)  # popped in this order
    assert await _fetch(redis, keys, 5) == [first]  # stops before the suspect
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [first]
    assert await _fetch(redis, keys, 5) == [suspect]  # then the suspect, alone
    assert await _fetch(redis, keys, 5) == [later]
    assert await redis.llen(keys.queue("default")) == 0


@pytest.mark.parametrize("counter_value", [None, "0", "garbage"])
async def test_a_forged_mark_runs_as_a_plain_job(
    redis: Redis, keys: Keys, counter_value: str | None
) -> None:
    """A producer wrote `"suspect":1` (no orphan counter behind it): not isolated."""
    first, later = make_job(), make_job()
    forged = make_suspect()
    if counter_value is not None:
        await redis.set(keys.orphanings(jid_of(forged)), counter_value)
    await enqueue(redis, keys, "default", first, forged, later)
    plain = b"{" + forged[len(b'{"suspect":1,') :]
    assert await _fetch(redis, keys, 5) == [first, plain, later]  # one batch, mark cut off
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [later, plain, first]


async def test_forged_suspect_that_is_only_a_mark(redis: Redis, keys: Keys) -> None:
    await enqueue(redis, keys, "default", b'{"suspect":1}', b'{"suspect":true,"jid":"j"}')
    assert await _fetch(redis, keys, 5) == [b"{}", b'{"suspect":true,"jid":"j"}']


async def test_strict_order_a_suspect_at_a_later_queue_does_not_end_the_batch(
    redis: Redis, keys: Keys
) -> None:
    """A trickle into the first queue never starves the queues after a suspect's."""
    suspect = await real_suspect(redis, keys, "mid")
    behind = make_job("mid")
    await enqueue(redis, keys, "mid", suspect, behind)
    low = [make_job("low") for _ in range(3)]
    await enqueue(redis, keys, "low", *low)
    await redis.delete(keys.wakeup("mid"))
    high = make_job("high")
    await enqueue(redis, keys, "high", high)
    assert await _fetch(redis, keys, 5, ["high", "mid", "low"]) == [high, *low]
    # The suspect stays at the front of its queue, with the job behind it, and
    # an idle process is woken to run it alone.
    assert await drain(redis, keys.queue("mid")) == [suspect, behind]
    assert await redis.exists(keys.wakeup("mid")) == 1


async def test_strict_order_a_trickle_first_still_serves_the_rest(redis: Redis, keys: Keys) -> None:
    suspect = await real_suspect(redis, keys, "mid")
    await enqueue(redis, keys, "mid", suspect)
    low = [make_job("low") for _ in range(3)]
    await enqueue(redis, keys, "low", *low)
    taken: list[bytes] = []
    for _ in range(3):
        await enqueue(redis, keys, "high", make_job("high"))
        taken += await _fetch(redis, keys, 2, ["high", "mid", "low"])
    assert [t for t in taken if t in low] == low
    assert await redis.lrange(keys.queue("mid"), 0, -1) == [suspect]


async def test_a_caller_declining_suspects_skips_their_queue(redis: Redis, keys: Keys) -> None:
    suspect = await real_suspect(redis, keys, "a")
    await enqueue(redis, keys, "a", suspect, make_job("a"))
    other = make_job("b")
    await enqueue(redis, keys, "b", other)
    await redis.delete(keys.wakeup("a"))
    assert await _fetch(redis, keys, 5, ["a", "b"], suspects=False) == [other]
    assert await redis.lindex(keys.queue("a"), -1) == suspect  # still at the front
    # No wake-up from a caller that declines: it would only wake itself.
    assert await redis.exists(keys.wakeup("a")) == 0
    assert await _fetch(redis, keys, 5, ["a", "b"]) == [suspect]
