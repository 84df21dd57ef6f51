"""overdue.lua: the candidates of a recovery pass are the overdue identities and
the registered ones missing from the beats index, never the fresh ones."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import orphans
from tests.lua.support import redis_now

pytestmark = pytest.mark.anyio

THRESHOLD = 10.0


async def test_only_overdue_and_unindexed_identities_are_candidates(
    redis: Redis, keys: Keys
) -> None:
    now = await redis_now(redis)
    await redis.zadd(keys.beats, {"fresh": now - 1, "late": now - THRESHOLD - 1})
    await redis.sadd(keys.processes, "fresh", "late", "old-version")
    await redis.sadd(keys.in_progress_identities, "fresh", "lost-index")

    found = await orphans.overdue(redis, keys, threshold=THRESHOLD)

    assert found == {"late", "old-version", "lost-index"}


async def test_a_wrong_typed_index_makes_every_registered_identity_a_candidate(
    redis: Redis, keys: Keys
) -> None:
    await redis.set(keys.beats, "not a sorted set")
    await redis.sadd(keys.processes, "a")
    await redis.sadd(keys.in_progress_identities, "b")

    assert await orphans.overdue(redis, keys, threshold=THRESHOLD) == {"a", "b"}


async def test_no_registered_identity_no_candidate(redis: Redis, keys: Keys) -> None:
    assert await orphans.overdue(redis, keys, threshold=THRESHOLD) == set()
