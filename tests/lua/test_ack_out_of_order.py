"""includes/ack_jobs.lua: acks out of the in-progress list's order.

From WALK_FROM (24) acks out of order on, they are removed in one walk of the
list rather than one LREM each. The outcome must be the LREM's to the byte:
the jobs left keep their order, each ack removes one copy (the tail-most),
and an ack that finds no copy left is reported missing.
"""

from __future__ import annotations

import random

import pytest
from redis.asyncio import Redis

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import Ack, today
from tests.lua.support import jid_of, make_job

pytestmark = pytest.mark.anyio

ME = "host:1:me"
WALK_FROM = 24


def lrem_model(head_first: list[bytes], acked: list[bytes]) -> tuple[list[bytes], list[int]]:
    """What one ``LREM key -1 job`` per ack, in ack order, leaves (head first), and
    the 0-based positions of the acks that removed nothing."""
    left = list(head_first)
    missing = []
    for position, raw in enumerate(acked):
        for at in range(len(left) - 1, -1, -1):
            if left[at] == raw:
                del left[at]
                break
        else:
            missing.append(position)
    return left, missing


async def _on_list(redis: Redis, keys: Keys, *oldest_first: bytes) -> list[bytes]:
    """The jobs on the in-progress list as fetches leave them; returns it head first."""
    await redis.lpush(keys.in_progress(ME), *oldest_first)
    return list(reversed(oldest_first))


async def _lrem_calls(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_lrem", {}).get("calls", 0))


async def _stats(redis: Redis, keys: Keys) -> tuple[int, int]:
    total = await redis.get(keys.stats_processed)
    day = await redis.get(keys.stats_processed_on(today()))
    return int(total or 0), int(day or 0)


async def test_many_acks_out_of_order_go_in_one_walk_and_keep_the_rest_in_order(
    redis: Redis, keys: Keys
) -> None:
    jobs = [make_job("q") for _ in range(150)]
    head_first = await _on_list(redis, keys, *jobs)
    # Every other job of the oldest 120, newest first: none at the tail in order,
    # half of them above the tail the ack reads first.
    acked = [jobs[i] for i in range(118, -1, -2)]
    assert len(acked) // 2 >= WALK_FROM
    before = await _lrem_calls(redis)
    missing = await commands.ack(
        redis, keys, identity=ME, acks=[Ack(raw, jid_of(raw)) for raw in acked]
    )
    assert missing == []
    assert await _lrem_calls(redis) == before  # one walk, not one LREM per ack
    left, _ = lrem_model(head_first, acked)
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == left
    assert len(left) == 150 - len(acked)
    assert await _stats(redis, keys) == (len(acked), len(acked))


async def _lrange_calls(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_lrange", {}).get("calls", 0))


async def test_acks_a_little_out_of_order_are_found_in_the_tail_already_read(
    redis: Redis, keys: Keys
) -> None:
    jobs = [make_job("q") for _ in range(100)]
    head_first = await _on_list(redis, keys, *jobs)
    # The 40 oldest, each pair swapped (1, 0, 3, 2, ...): none trimmed in place,
    # all within the tail the ack reads first, so the list is read once.
    acked = [jobs[i + 1 - 2 * (i % 2)] for i in range(40)]
    before = await _lrange_calls(redis), await _lrem_calls(redis)
    assert await commands.ack(redis, keys, identity=ME, acks=[Ack(r, "") for r in acked]) == []
    assert (await _lrange_calls(redis), await _lrem_calls(redis)) == (before[0] + 1, before[1])
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == lrem_model(head_first, acked)[0]
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == list(reversed(jobs[40:]))


async def test_running_jobs_between_acked_ones_stay_in_order(redis: Redis, keys: Keys) -> None:
    jobs = [make_job("q") for _ in range(60)]
    head_first = await _on_list(redis, keys, *jobs)
    # The oldest 40 but 2, 6, 10... (still running), newest first: those stay
    # among the 20 newest's tail, in their order.
    acked = [jobs[i] for i in range(39, -1, -1) if i % 4 != 2]
    assert len(acked) == 30
    assert await commands.ack(redis, keys, identity=ME, acks=[Ack(r, "") for r in acked]) == []
    left = await redis.lrange(keys.in_progress(ME), 0, -1)
    assert left == lrem_model(head_first, acked)[0]
    assert left == [*reversed(jobs[40:]), *(jobs[i] for i in range(38, -1, -4))]


async def test_a_few_acks_above_the_tail_read_take_one_lrem_each(redis: Redis, keys: Keys) -> None:
    jobs = [make_job("q") for _ in range(100)]
    head_first = await _on_list(redis, keys, *jobs)
    # The 40 oldest, pairs swapped, and two of the newest (fetched ahead,
    # finished early): the tail read holds all but those two.
    acked = [jobs[i + 1 - 2 * (i % 2)] for i in range(40)] + [jobs[95], jobs[90]]
    before = await _lrange_calls(redis), await _lrem_calls(redis)
    assert await commands.ack(redis, keys, identity=ME, acks=[Ack(r, "") for r in acked]) == []
    assert (await _lrange_calls(redis), await _lrem_calls(redis)) == (before[0] + 1, before[1] + 2)
    left = await redis.lrange(keys.in_progress(ME), 0, -1)
    assert left == lrem_model(head_first, acked)[0]
    assert left == [jobs[i] for i in range(99, 39, -1) if i not in (95, 90)]


async def test_few_acks_out_of_order_still_take_one_lrem_each(redis: Redis, keys: Keys) -> None:
    jobs = [make_job("q") for _ in range(10)]
    head_first = await _on_list(redis, keys, *jobs)
    acked = [jobs[5], jobs[2], jobs[8]]
    before = await _lrem_calls(redis)
    assert await commands.ack(redis, keys, identity=ME, acks=[Ack(r, "") for r in acked]) == []
    assert await _lrem_calls(redis) == before + 3
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == lrem_model(head_first, acked)[0]


async def test_in_order_tail_then_a_walk_for_the_rest(redis: Redis, keys: Keys) -> None:
    jobs = [make_job("q") for _ in range(80)]
    head_first = await _on_list(redis, keys, *jobs)
    # The 5 oldest in fetch order (trimmed off the tail), then 30 from further in.
    acked = jobs[:5] + [jobs[i] for i in range(70, 10, -2)]
    missing = await commands.ack(redis, keys, identity=ME, acks=[Ack(r, "") for r in acked])
    assert missing == []
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == lrem_model(head_first, acked)[0]


async def test_duplicates_lose_one_copy_per_ack_tail_most_first(redis: Redis, keys: Keys) -> None:
    dup = make_job("q")
    others = [make_job("q") for _ in range(40)]
    # Oldest first: dup sits at four places among the others.
    oldest_first = [*others[:10], dup, *others[10:20], dup, *others[20:30], dup, *others[30:], dup]
    head_first = await _on_list(redis, keys, *oldest_first)
    # dup acked twice among 30 others acked newest first: two copies go, the two
    # tail-most (the oldest fetches), two stay where they were.
    acked = [others[i] for i in range(39, 24, -1)] + [dup] + [others[i] for i in range(24, 9, -1)]
    acked.append(dup)
    assert len(acked) - 1 >= WALK_FROM
    missing = await commands.ack(redis, keys, identity=ME, acks=[Ack(r, "") for r in acked])
    assert missing == []
    left = await redis.lrange(keys.in_progress(ME), 0, -1)
    assert left == lrem_model(head_first, acked)[0]
    assert left.count(dup) == 2
    # The two left are the newest copies (the head-most), now side by side: all
    # that sat between them was acked; the ten oldest others keep their order.
    assert left == [dup, dup, *reversed(others[:10])]


async def test_more_acks_than_copies_report_the_later_acks_missing(
    redis: Redis, keys: Keys
) -> None:
    dup, gone = make_job("q"), make_job("q")
    others = [make_job("q") for _ in range(30)]
    head_first = await _on_list(redis, keys, dup, *others)
    acked = [*reversed(others), dup, gone, dup]
    acks = [Ack(r, "") for r in acked]
    missing = await commands.ack(redis, keys, identity=ME, acks=acks)
    # The first ack of dup finds its one copy; the second, like the unknown job, finds none.
    assert missing == [acks[31], acks[32]]
    assert await redis.exists(keys.in_progress(ME)) == 0
    assert lrem_model(head_first, acked) == ([], [31, 32])
    assert await _stats(redis, keys) == (31, 31)  # only what was removed is counted


async def test_the_fetch_script_walks_too_and_still_takes_jobs(redis: Redis, keys: Keys) -> None:
    jobs = [make_job("q") for _ in range(60)]
    head_first = await _on_list(redis, keys, *jobs)
    acked = [jobs[i] for i in range(59, 20, -1)]
    fresh = make_job("q")
    await redis.lpush(keys.queue("q"), fresh)
    result = await commands.fetch(
        redis,
        keys,
        identity=ME,
        queues=["q"],
        want=1,
        acks=[Ack(r, "") for r in acked],
        reliable=True,
    )
    assert result.jobs == [fresh]
    assert result.missing_acks == []
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [
        fresh,
        *lrem_model(head_first, acked)[0],
    ]


@pytest.mark.parametrize("seed", range(12))
async def test_nearly_ordered_batches_match_one_lrem_per_ack(
    redis: Redis, keys: Keys, seed: int
) -> None:
    # As a worker's acks come: the oldest jobs, in fetch order but for a few
    # neighbours swapped, some still running, perhaps one gone.
    rng = random.Random(seed)
    oldest_first = [make_job("q") for _ in range(rng.randint(40, 150))]
    head_first = await _on_list(redis, keys, *oldest_first)
    done = [raw for raw in oldest_first[: rng.randint(30, 40)] if rng.random() > 0.1]
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(len(done) - 1)
        done[at], done[at + 1] = done[at + 1], done[at]
    if rng.random() < 0.5:
        done.insert(rng.randrange(len(done)), make_job("q"))
    acks = [Ack(r, "") for r in done]
    missing = await commands.ack(redis, keys, identity=ME, acks=acks)
    left, missing_at = lrem_model(head_first, done)
    assert missing == [acks[i] for i in missing_at]
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == left


@pytest.mark.parametrize("seed", range(12))
async def test_random_batches_match_one_lrem_per_ack(redis: Redis, keys: Keys, seed: int) -> None:
    rng = random.Random(seed)
    pool = [make_job("q") for _ in range(60)]
    oldest_first = [rng.choice(pool) for _ in range(rng.randint(30, 120))]
    head_first = await _on_list(redis, keys, *oldest_first)
    acked = rng.sample(oldest_first, rng.randint(WALK_FROM, len(oldest_first)))
    acked += [make_job("q") for _ in range(rng.randint(0, 3))]  # never fetched here
    acked += rng.sample(pool, 5)  # some with no copy left
    rng.shuffle(acked)
    acks = [Ack(r, "") for r in acked]
    missing = await commands.ack(redis, keys, identity=ME, acks=acks)
    left, missing_at = lrem_model(head_first, acked)
    assert missing == [acks[i] for i in missing_at]
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == left
    removed = len(acked) - len(missing_at)
    assert await _stats(redis, keys) == (removed, removed)
