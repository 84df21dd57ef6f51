"""fetch.lua renews the lock of each until_executed unique job it takes, in the
step that moves it (issue 22 §3): owner-checked, taken again when free, a
newer copy's left alone; nothing else is touched."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import Renewal
from cogworker_async.unique.lock import lock_prefix
from tests.lua.support import enqueue, jid_of, make_job

pytestmark = pytest.mark.anyio

ME = "host:1:me"


def unique_job(
    keys: Keys, name: str, *, unique_for: float | None = 30, mode: str | None = None
) -> bytes:
    field: dict[str, object] = {"key": keys.unique(name)}
    if unique_for is not None:
        field["for"] = unique_for
    if mode is not None:
        field["mode"] = mode
    return make_job("q", unique=field)


async def take(
    redis: Redis, keys: Keys, *jobs: bytes, prefix: str | None = None
) -> commands.FetchResult:
    await enqueue(redis, keys, "q", *jobs)
    return await commands.fetch(
        redis,
        keys,
        identity=ME,
        queues=["q"],
        want=len(jobs),
        acks=[],
        reliable=True,
        unique_prefix=lock_prefix(keys) if prefix is None else prefix,
        unique_default=100,
    )


async def test_a_taken_jobs_lock_is_renewed_taken_again_or_left_to_its_holder(
    redis: Redis, keys: Keys
) -> None:
    own, lapsed, other, plain = (
        unique_job(keys, "own"),
        unique_job(keys, "lapsed", unique_for=None),
        unique_job(keys, "other"),
        make_job("q"),
    )
    await redis.set(keys.unique("own"), jid_of(own), px=600_000_000)
    await redis.set(keys.unique("other"), "newer", px=50_000)
    result = await take(redis, keys, own, lapsed, other, plain)
    assert result.jobs == [own, lapsed, other, plain]
    assert result.renewals == [
        Renewal(own, jid_of(own), jid_of(own)),
        Renewal(lapsed, jid_of(lapsed), jid_of(lapsed)),
        Renewal(other, jid_of(other), "newer"),
    ]
    assert 25_000 < await redis.pttl(keys.unique("own")) <= 30_000  # unique_for from now
    assert await redis.get(keys.unique("lapsed")) == jid_of(lapsed).encode()
    assert 95_000 < await redis.pttl(keys.unique("lapsed")) <= 100_000  # the default
    assert await redis.get(keys.unique("other")) == b"newer"
    assert await redis.pttl(keys.unique("other")) <= 50_000


async def test_until_executing_foreign_keys_non_strings_and_no_prefix_are_left(
    redis: Redis, keys: Keys
) -> None:
    executing = unique_job(keys, "ex", mode="until_executing")
    outside = f"{keys.ns}:elsewhere"  # in the namespace (and its slot), not a lock
    foreign = make_job("q", unique={"key": outside, "for": 30})
    hashed = unique_job(keys, "hashed")
    await redis.hset(keys.unique("hashed"), "a", "b")
    result = await take(redis, keys, executing, foreign, hashed)
    assert result.renewals == [Renewal(hashed, jid_of(hashed), None)]
    assert not await redis.exists(keys.unique("ex"), outside)
    assert await redis.type(keys.unique("hashed")) == b"hash"
    off = unique_job(keys, "off")
    assert (await take(redis, keys, off, prefix="")).renewals == []
    assert not await redis.exists(keys.unique("off"))
