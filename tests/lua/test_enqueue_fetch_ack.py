"""enqueue.lua, fetch.lua and ack.lua: every return path."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from cogworker_async.keys import Keys
from cogworker_async.store import commands
from cogworker_async.store.commands import DAY_STAT_TTL, Ack, fetch, today
from cogworker_async.store.scripts import script
from tests.lua.support import drain, enqueue, jid_of, make_job, make_suspect

pytestmark = pytest.mark.anyio

ME = "host:1:me"


async def fetch_some(
    redis: Redis,
    keys: Keys,
    queues: list[str],
    want: int,
    acks: list[Ack] | None = None,
    *,
    reliable: bool = True,
) -> commands.FetchResult:
    return await fetch(
        redis, keys, identity=ME, queues=queues, want=want, acks=acks or [], reliable=reliable
    )


# --- enqueue.lua --------------------------------------------------------------


async def test_enqueue_pushes_left_lists_queue_and_touches_marker(redis: Redis, keys: Keys) -> None:
    a, b, c = make_job("mail"), make_job("mail"), make_job("mail")
    assert await enqueue(redis, keys, "mail", a) == 1
    assert await enqueue(redis, keys, "mail", b, c) == 3
    # LPUSH: newest at the head, oldest taken first from the right.
    assert await redis.lrange(keys.queue("mail"), 0, -1) == [c, b, a]
    assert await redis.smembers(keys.queues) == {b"mail"}
    assert await redis.zscore(keys.wakeup("mail"), "1") == 0
    assert await drain(redis, keys.queue("mail")) == [a, b, c]


async def test_enqueue_marker_recreated_after_consumed(redis: Redis, keys: Keys) -> None:
    await enqueue(redis, keys, "q", make_job("q"))
    assert await redis.bzpopmin([keys.wakeup("q")], timeout=1) is not None
    assert await redis.exists(keys.wakeup("q")) == 0
    await enqueue(redis, keys, "q", make_job("q"))
    assert await redis.zcard(keys.wakeup("q")) == 1


# --- fetch.lua: taking jobs ---------------------------------------------------


async def test_fetch_reliable_moves_oldest_first(redis: Redis, keys: Keys) -> None:
    a, b, c = make_job("q"), make_job("q"), make_job("q")
    await enqueue(redis, keys, "q", a, b, c)
    result = await fetch_some(redis, keys, ["q"], want=2)
    assert result.jobs == [a, b]
    assert result.missing_acks == []
    # On the in-progress list, exactly as fetched (the newest fetch at the head).
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [b, a]
    assert await redis.lrange(keys.queue("q"), 0, -1) == [c]


async def test_fetch_respects_want(redis: Redis, keys: Keys) -> None:
    jobs = [make_job("q") for _ in range(5)]
    await enqueue(redis, keys, "q", *jobs)
    assert (await fetch_some(redis, keys, ["q"], want=1)).jobs == jobs[:1]
    assert (await fetch_some(redis, keys, ["q"], want=3)).jobs == jobs[1:4]
    assert (await fetch_some(redis, keys, ["q"], want=0)).jobs == []
    assert (await fetch_some(redis, keys, ["q"], want=10)).jobs == jobs[4:]
    assert await redis.llen(keys.in_progress(ME)) == 5
    assert await redis.llen(keys.queue("q")) == 0


async def test_fetch_empty_queues(redis: Redis, keys: Keys) -> None:
    result = await fetch_some(redis, keys, ["q1", "q2"], want=4)
    assert result.jobs == []
    assert await redis.exists(keys.in_progress(ME)) == 0


async def test_fetch_strict_order_across_queues(redis: Redis, keys: Keys) -> None:
    first = [make_job("q1")]
    second = [make_job("q2"), make_job("q2")]
    await enqueue(redis, keys, "q1", *first)
    await enqueue(redis, keys, "q2", *second)
    # q1 alone fills want=1; q2 is not touched.
    assert (await fetch_some(redis, keys, ["q2", "q1"], want=1)).jobs == second[:1]
    assert (await fetch_some(redis, keys, ["q1", "q2"], want=3)).jobs == first + second[1:]


async def test_fetch_order_given_by_caller(redis: Redis, keys: Keys) -> None:
    a1, b1 = make_job("a"), make_job("b")
    await enqueue(redis, keys, "a", a1)
    await enqueue(redis, keys, "b", b1)
    assert (await fetch_some(redis, keys, ["b", "a"], want=2)).jobs == [b1, a1]


async def test_fetch_skips_paused_queues(redis: Redis, keys: Keys) -> None:
    p, r = make_job("paused_q"), make_job("run_q")
    await enqueue(redis, keys, "paused_q", p)
    await enqueue(redis, keys, "run_q", r)
    await redis.sadd(keys.paused, "paused_q")
    assert (await fetch_some(redis, keys, ["paused_q", "run_q"], want=5)).jobs == [r]
    assert await redis.lrange(keys.queue("paused_q"), 0, -1) == [p]
    await redis.srem(keys.paused, "paused_q")
    assert (await fetch_some(redis, keys, ["paused_q", "run_q"], want=5)).jobs == [p]


async def test_fetch_basic_pops_without_in_progress(redis: Redis, keys: Keys) -> None:
    a, b, c = make_job("q"), make_job("q"), make_job("q")
    await enqueue(redis, keys, "q", a, b, c)
    result = await fetch_some(redis, keys, ["q"], want=2, reliable=False)
    assert result.jobs == [a, b]
    assert await redis.exists(keys.in_progress(ME)) == 0
    assert await redis.lrange(keys.queue("q"), 0, -1) == [c]


# --- fetch.lua: wake-up marker ----------------------------------------------


async def _push_without_marker(redis: Redis, keys: Keys, queue: str, count: int) -> list[bytes]:
    jobs = [make_job(queue) for _ in range(count)]
    await enqueue(redis, keys, queue, *jobs)
    await redis.delete(keys.wakeup(queue))
    return jobs


async def test_marker_readded_when_want_filled_and_jobs_left(redis: Redis, keys: Keys) -> None:
    await _push_without_marker(redis, keys, "q", 3)
    await fetch_some(redis, keys, ["q"], want=2)
    assert await redis.zscore(keys.wakeup("q"), "1") == 0


async def test_marker_not_readded_when_queue_emptied(redis: Redis, keys: Keys) -> None:
    await _push_without_marker(redis, keys, "q", 2)
    assert len((await fetch_some(redis, keys, ["q"], want=2)).jobs) == 2
    assert await redis.exists(keys.wakeup("q")) == 0


async def test_marker_not_readded_when_want_not_filled(redis: Redis, keys: Keys) -> None:
    await _push_without_marker(redis, keys, "q", 2)
    assert len((await fetch_some(redis, keys, ["q"], want=5)).jobs) == 2
    assert await redis.exists(keys.wakeup("q")) == 0


async def test_marker_readded_in_basic_mode(redis: Redis, keys: Keys) -> None:
    await _push_without_marker(redis, keys, "q", 2)
    await fetch_some(redis, keys, ["q"], want=1, reliable=False)
    assert await redis.exists(keys.wakeup("q")) == 1


async def test_marker_only_for_queue_that_filled_want(redis: Redis, keys: Keys) -> None:
    await _push_without_marker(redis, keys, "q1", 1)
    await _push_without_marker(redis, keys, "q2", 3)
    jobs = (await fetch_some(redis, keys, ["q1", "q2"], want=2)).jobs
    assert len(jobs) == 2
    assert await redis.exists(keys.wakeup("q1")) == 0
    assert await redis.exists(keys.wakeup("q2")) == 1


# --- acknowledgements (fetch.lua and ack.lua share ack_jobs) -----------------


async def _fetched(redis: Redis, keys: Keys, count: int) -> list[bytes]:
    jobs = [make_job("q") for _ in range(count)]
    await enqueue(redis, keys, "q", *jobs)
    taken = (await fetch_some(redis, keys, ["q"], want=count)).jobs
    assert taken == jobs
    return taken


async def _stats(redis: Redis, keys: Keys) -> tuple[int, int]:
    total = await redis.get(keys.stats_processed)
    day = await redis.get(keys.stats_processed_on(today()))
    return int(total or 0), int(day or 0)


async def _on_list(redis: Redis, keys: Keys, *oldest_first: bytes) -> None:
    """Put jobs on the in-progress list as fetches would: the oldest at the tail."""
    await redis.lpush(keys.in_progress(ME), *oldest_first)


async def test_fetch_acks_remove_clear_suspect_counters_and_count(redis: Redis, keys: Keys) -> None:
    suspect, plain, c = make_suspect("q"), make_job("q"), make_job("q")
    await _on_list(redis, keys, suspect, plain, c)
    # Only a suspect's ack looks for its orphan counter: a plain job's (one
    # requeued plainly after a first orphaning has one) is left to expire.
    await redis.set(keys.orphanings(jid_of(suspect)), 2)
    await redis.set(keys.orphanings(jid_of(plain)), 2)
    await redis.set(keys.stats_processed, 10)
    acks = [Ack(suspect, jid_of(suspect)), Ack(plain, jid_of(plain))]
    result = await fetch_some(redis, keys, ["q"], want=0, acks=acks)
    assert result.jobs == []
    assert result.missing_acks == []
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [c]
    assert await redis.exists(keys.orphanings(jid_of(suspect))) == 0
    assert await redis.get(keys.orphanings(jid_of(plain))) == b"2"
    assert await _stats(redis, keys) == (12, 2)
    ttl = await redis.ttl(keys.stats_processed_on(today()))
    assert DAY_STAT_TTL - 60 < ttl <= DAY_STAT_TTL


@pytest.mark.parametrize(
    ("acked", "left"),
    [
        # (indexes of the jobs a, b, c, d acked, in this order; what stays, head first)
        ((0, 1), (3, 2)),  # the two oldest, in fetch order: trimmed off the tail
        ((1, 0), (3, 2)),  # same jobs, finished in the other order
        ((0, 2), (3, 1)),  # one at the tail, one further in
        ((2,), (3, 1, 0)),  # none at the tail
        ((3, 2, 1, 0), ()),  # all of them: the list goes
    ],
)
async def test_acks_remove_exactly_their_jobs_wherever_they_sit(
    redis: Redis, keys: Keys, acked: tuple[int, ...], left: tuple[int, ...]
) -> None:
    jobs = [make_job("q") for _ in range(4)]
    await _on_list(redis, keys, *jobs)  # a (oldest) at the tail, d at the head
    missing = await commands.ack(
        redis, keys, identity=ME, acks=[Ack(jobs[i], jid_of(jobs[i])) for i in acked]
    )
    assert missing == []
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [jobs[i] for i in left]
    assert await _stats(redis, keys) == (len(acked), len(acked))


async def test_duplicate_payloads_at_the_tail_lose_one_copy_per_ack(
    redis: Redis, keys: Keys
) -> None:
    raw, other = make_job("q"), make_job("q")
    await _on_list(redis, keys, raw, raw, other, raw)
    assert await commands.ack(redis, keys, identity=ME, acks=[Ack(raw, ""), Ack(raw, "")]) == []
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [raw, other]


async def test_fetch_acks_and_takes_in_one_call(redis: Redis, keys: Keys) -> None:
    (a,) = await _fetched(redis, keys, 1)
    d, e = make_job("q"), make_job("q")
    await enqueue(redis, keys, "q", d, e)
    result = await fetch_some(redis, keys, ["q"], want=1, acks=[Ack(a, jid_of(a))])
    assert result.jobs == [d]
    assert result.missing_acks == []
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [d]
    assert await _stats(redis, keys) == (1, 1)


async def test_fetch_reports_missing_acks(redis: Redis, keys: Keys) -> None:
    a, b = await _fetched(redis, keys, 2)
    gone = make_suspect("q")
    await redis.set(keys.orphanings(jid_of(gone)), 1)
    acks = [Ack(a, jid_of(a)), Ack(gone, jid_of(gone)), Ack(b, jid_of(b))]
    result = await fetch_some(redis, keys, ["q"], want=1, acks=acks)
    assert result.missing_acks == [acks[1]]
    assert await redis.exists(keys.in_progress(ME)) == 0
    # A missing job's counter is cleared too: it got to run.
    assert await redis.exists(keys.orphanings(jid_of(gone))) == 0


async def test_unreadable_suspect_is_acked_and_counters_left(redis: Redis, keys: Keys) -> None:
    # No jid to be read: nothing to clear (requeue.lua could not count it either).
    broken = b'{"suspect":1,"jid": not json'
    await _on_list(redis, keys, broken)
    assert await commands.ack(redis, keys, identity=ME, acks=[Ack(broken, "")]) == []
    assert await redis.exists(keys.in_progress(ME)) == 0
    assert await _stats(redis, keys) == (1, 1)


async def test_fetch_without_acks_counts_nothing(redis: Redis, keys: Keys) -> None:
    await _fetched(redis, keys, 2)
    assert await redis.exists(keys.stats_processed, keys.stats_processed_on(today())) == 0


async def test_ack_script_semantics(redis: Redis, keys: Keys) -> None:
    a, b, c = make_suspect("q"), make_job("q"), make_suspect("q")
    await _on_list(redis, keys, a, b, c)
    gone = make_suspect("q")
    for raw in (a, c, gone):
        await redis.set(keys.orphanings(jid_of(raw)), 3)
    acks = [Ack(gone, jid_of(gone)), Ack(a, jid_of(a)), Ack(c, jid_of(c))]
    missing = await commands.ack(redis, keys, identity=ME, acks=acks)
    assert missing == [acks[0]]
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [b]
    for raw in (a, c, gone):
        assert await redis.exists(keys.orphanings(jid_of(raw))) == 0
    assert await _stats(redis, keys) == (2, 2)  # the gone one is not counted again
    ttl = await redis.ttl(keys.stats_processed_on(today()))
    assert DAY_STAT_TTL - 60 < ttl <= DAY_STAT_TTL


async def test_ack_empty_batch(redis: Redis, keys: Keys) -> None:
    (a,) = await _fetched(redis, keys, 1)
    assert await commands.ack(redis, keys, identity=ME, acks=[]) == []
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [a]
    assert await redis.exists(keys.stats_processed) == 0


async def test_ack_removes_one_copy_from_the_tail(redis: Redis, keys: Keys) -> None:
    # The same bytes twice (a producer pushed one payload twice): one ack, one copy.
    raw = make_job("q")
    await redis.lpush(keys.in_progress(ME), raw, b"other", raw)
    assert await commands.ack(redis, keys, identity=ME, acks=[Ack(raw, jid_of(raw))]) == []
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == [raw, b"other"]


async def test_ack_script_raw_bytes_untouched(redis: Redis, keys: Keys) -> None:
    # A payload with odd but valid JSON spacing and non-ASCII text is acked by value.
    raw = '{"jid": "abc", "class":"x",  "queue":"q", "args":["é"]}'.encode()
    await redis.lpush(keys.in_progress(ME), raw)
    missing = await script("ack").run(
        redis,
        [
            keys.in_progress(ME),
            keys.stats_processed,
            keys.stats_processed_on(today()),
        ],
        [keys.orphanings_prefix, DAY_STAT_TTL, "", "", 1, raw],
    )
    assert missing == []
    assert await redis.exists(keys.in_progress(ME)) == 0


# --- a wrong-typed key beside the queues ------------------------------------------


async def test_enqueue_with_wrong_type_marker_is_all_or_nothing(redis: Redis, keys: Keys) -> None:
    """Pushed and reported, or refused and not pushed: never pushed but reported failed."""
    await redis.set(keys.wakeup("q"), "not a sorted set")
    job = make_job("q")
    try:
        length = await enqueue(redis, keys, "q", job)
    except ResponseError:
        assert await redis.exists(keys.queue("q")) == 0
    else:
        assert length == 1
        assert await redis.lrange(keys.queue("q"), 0, -1) == [job]


async def test_fetch_with_wrong_type_marker_hands_out_what_it_moved(
    redis: Redis, keys: Keys
) -> None:
    """A job moved into in-progress is returned to the caller, or the call moved nothing."""
    jobs = [make_job("q") for _ in range(3)]
    await enqueue(redis, keys, "q", *jobs)
    await redis.delete(keys.wakeup("q"))
    await redis.set(keys.wakeup("q"), "not a sorted set")
    try:
        taken = (await fetch_some(redis, keys, ["q"], want=1)).jobs
    except ResponseError:
        taken = []
    assert await redis.lrange(keys.in_progress(ME), 0, -1) == taken
    assert await redis.llen(keys.queue("q")) == 3 - len(taken)


async def test_fetch_with_wrong_type_queue_strands_nothing(redis: Redis, keys: Keys) -> None:
    good = make_job("good")
    await enqueue(redis, keys, "good", good)
    await redis.set(keys.queue("bad"), "not a list")
    try:
        taken = (await fetch_some(redis, keys, ["good", "bad"], want=5)).jobs
    except ResponseError:
        taken = []
    in_progress = await redis.lrange(keys.in_progress(ME), 0, -1)
    assert in_progress == taken
    assert await redis.llen(keys.queue("good")) == 1 - len(taken)


async def test_fetch_with_wrong_type_stats_key_still_acks_and_fetches(
    redis: Redis, keys: Keys
) -> None:
    (a,) = await _fetched(redis, keys, 1)
    nxt = make_job("q")
    await enqueue(redis, keys, "q", nxt)
    await redis.hset(keys.stats_processed, "oops", 1)
    result = await fetch_some(redis, keys, ["q"], want=1, acks=[Ack(a, jid_of(a))])
    assert result.missing_acks == []
    assert result.jobs == [nxt]
