"""Batches in Lua: batch_open/add/close and includes/batch_end.lua, the count of each
member's end made by the step that settles it.

Every move of the lifecycle table is run on a batch member (the table's own
drivers, the worker-side ones given the holds the worker reads from the
payload): a move that ends the job counts it exactly once, as what it is, and
the closed batch fires its callbacks in that step; a move that does not end it
(a retry, a requeue) leaves it pending. Then the callbacks' rules one by one,
nested batches, and duplicate settlements that must count nothing.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import holds, lifecycle
from cogworker_async.holds import Event, Hold
from cogworker_async.keys import Keys
from cogworker_async.lifecycle import State, Transition
from cogworker_async.payload import new_jid
from cogworker_async.store import aborts, batches, commands
from cogworker_async.store.batches import BatchGone, Callback, Opened
from cogworker_async.store.scripts import expand, scripts_dir
from tests.lifecycle_places import places
from tests.lua import test_lifecycle_table as table
from tests.lua.support import drain, make_job

pytestmark = pytest.mark.anyio

ME = table.ME
CALLBACK_QUEUE = "callbacks"
EVENTS = ("success", "complete", "death")

# What each ended state counts as.
OUTCOME = {
    State.SUCCEEDED: "succeeded",
    State.FAILED: "failed",
    State.ABORTED: "failed",
    State.DISCARDED: "failed",
    State.DEAD: "dead",
}
# Moves that count no end, and why: bury.lua files an entry it could not
# parse (it names no batch it could read). A member moved out of dead (its
# death counted when it died) counts nothing more either: checked apart.
NOT_COUNTED = {
    ("bury", State.SCHEDULED, State.DEAD),
    ("bury", State.RETRYING, State.DEAD),
}


def callback(event: str) -> Callback:
    return Callback(CALLBACK_QUEUE, orjson.dumps({"callback": event}))


async def open_batch(
    redis: Redis, keys: Keys, parent: str | None = None, events: tuple[str, ...] = EVENTS
) -> str:
    bid = new_jid()
    opened = await batches.open_batch(
        redis,
        keys,
        bid=bid,
        created_at=time.time(),
        callbacks={event: callback(event) for event in events},
        parent=parent,
    )
    assert opened is Opened.OPENED
    return bid


async def fired(redis: Redis, keys: Keys) -> list[str]:
    """The callbacks pushed so far, in push order (drained)."""
    return [orjson.loads(raw)["callback"] for raw in await drain(redis, keys.queue(CALLBACK_QUEUE))]


async def counts(redis: Redis, keys: Keys, bid: str) -> dict[str, Any]:
    fields = await batches.read_batch(redis, keys, bid)
    assert fields is not None
    return {
        "state": fields["state"],
        **{name: int(fields[name]) for name in batches.COUNTS},
    }


class MemberJob(table.Job):
    """A job of the lifecycle table that is a batch member; its filings carry its
    holds as the worker reads them from its payload."""

    @property
    def held(self) -> tuple[Hold, ...]:
        return holds.read(orjson.loads(self.raw), self.keys)

    def filing(self, target: str | None) -> commands.Filing:
        plain = super().filing(target)
        return commands.Filing(
            plain.raw, plain.jid, target, plain.score, plain.entry, holds=self.held
        )


async def ack(job: MemberJob) -> None:
    acks = [commands.Ack(job.raw, job.jid, holds=job.held)]
    assert await commands.ack(job.redis, job.keys, identity=ME, acks=acks) == []


async def ack_with_fetch(job: MemberJob) -> None:
    await commands.fetch(
        job.redis,
        job.keys,
        identity=ME,
        queues=["default"],
        want=1,
        acks=[commands.Ack(job.raw, job.jid, holds=job.held)],
        reliable=True,
    )


async def settle_aborted(job: MemberJob) -> None:
    assert await aborts.settle_aborted(
        job.redis, job.keys, identity=ME, raw=job.raw, jid=job.jid, holds=job.held
    )


# The worker's own paths (it passes the holds it read); the rest read the payload.
WORKER_MOVES = {
    ("ack", State.RUNNING, State.SUCCEEDED): ack,
    ("fetch", State.RUNNING, State.SUCCEEDED): ack_with_fetch,
    ("settle_aborted", State.RUNNING, State.ABORTED): settle_aborted,
}


def _name(t: Transition) -> str:
    source = "new" if t.source is None else t.source.label
    return f"{t.script}:{source}->{t.target.label}"


# A member never waits on other jobs (after=[...] is refused in a batch).
MEMBER_MOVES = [t for t in lifecycle.TRANSITIONS if t.source not in (None, State.WAITING)]


@pytest.mark.parametrize("transition", MEMBER_MOVES, ids=_name)
async def test_each_move_counts_a_members_end_once_and_nothing_else(
    redis: Redis, keys: Keys, transition: Transition
) -> None:
    bid = await open_batch(redis, keys)
    jid = new_jid()
    # The moves in and out of "held" are a limited job's (a limit of its own),
    # in and out of "in_line" a fair job's.
    limited = State.HELD in (transition.source, transition.target)
    fair = State.IN_LINE in (transition.source, transition.target)
    fields = {**(table.LIMITED if limited else {}), **(table.FAIR if fair else {})}
    job = MemberJob(redis, keys, jid, make_job(jid=jid, batch=bid, **fields))
    key = (transition.script, transition.source, transition.target)
    if key not in table.PLACED_BY_MOVE:
        await table.put(job, transition.source)
    # A member placed by hand (the move's source), pending in the closed batch.
    await redis.sadd(keys.batch_pending(bid), jid)
    await redis.hincrby(keys.batch(bid), "total", 1)
    assert await batches.close_batch(redis, keys, bid) == "running"
    move = WORKER_MOVES.get(key) or table.MOVES[key]
    if transition.source is State.DEAD:
        # In dead, its death was counted as it died: whatever moves it later
        # (an operator's retry, delete, the trim, a raw burial's swap) counts
        # nothing more, and the done batch fires nothing again.
        await settle(redis, keys, bid, jid, Event.DEAD)
        assert await fired(redis, keys) == ["death", "complete"]
        before = await counts(redis, keys, bid)
        await move(job)
        assert await places(redis, keys, jid) == [transition.target.place]
        assert await counts(redis, keys, bid) == before
        assert await fired(redis, keys) == []
        return
    await move(job)
    assert await places(redis, keys, jid) == [transition.target.place]
    after = await counts(redis, keys, bid)
    ends = transition.target.ended or transition.target is State.DEAD
    if ends and key not in NOT_COUNTED:
        outcome = OUTCOME[transition.target]
        expected = {"succeeded": 0, "failed": 0, "dead": 0, outcome: 1}
        assert after == {"state": "done", "total": 1, "pending": 0, **expected}
        want = {"succeeded": ["success", "complete"], "failed": ["complete"]}
        assert await fired(redis, keys) == want.get(outcome, ["death", "complete"])
    else:
        zero = {"succeeded": 0, "failed": 0, "dead": 0}
        assert after == {"state": "running", "total": 1, "pending": 1, **zero}
        assert await fired(redis, keys) == []


# The include, as the settling scripts call it, for settlements made twice.
BLOCK = expand(
    """--- @include holds
return settle_holds(1, nil)
""",
    scripts_dir() / "includes",
    origin="test_batches",
)


async def settle(redis: Redis, keys: Keys, bid: str, jid: str, event: Event) -> None:
    groups = holds.encode(keys, [Hold("batch", keys.batch(bid), jid)], event)
    await redis.eval(BLOCK, 0, len(groups) // holds.HOLD_FIELDS, *groups)  # type: ignore[misc]


async def add(redis: Redis, keys: Keys, bid: str, n: int) -> list[str]:
    jids = [new_jid() for _ in range(n)]
    members = [(jid, make_job(jid=jid, batch=bid)) for jid in jids]
    await batches.add_members(redis, keys, bid=bid, queue="default", members=members)
    return jids


async def test_one_ack_call_counts_many_members_of_two_batches_but_not_a_missing_one(
    redis: Redis, keys: Keys
) -> None:
    """An ack call sends one group per batch for its members (holds.encode_calls):
    each member counts once, in its own batch, and a member whose job recovery
    took back (missing from the in-progress list: it runs again) is not counted."""
    first, second = await open_batch(redis, keys), await open_batch(redis, keys)
    a = await add(redis, keys, first, 3)
    b = await add(redis, keys, second, 2)
    for bid in (first, second):
        await batches.close_batch(redis, keys, bid)
    plain = make_job(jid=new_jid())
    jobs = [(jid, make_job(jid=jid, batch=first)) for jid in a]
    jobs += [(jid, make_job(jid=jid, batch=second)) for jid in b]
    acks = [commands.Ack(plain, "plain")]
    acks += [
        commands.Ack(raw, jid, holds=MemberJob(redis, keys, jid, raw).held) for jid, raw in jobs
    ]
    missing = acks[2]  # a[1]: not on the list
    for ack_ in acks:
        if ack_ is not missing:
            await redis.rpush(keys.in_progress(ME), ack_.raw)
    groups = holds.encode_calls(
        keys, [(i, ack_.holds) for i, ack_ in enumerate(acks, 1) if ack_.holds], Event.ACK
    )
    assert len(groups) == 2 * holds.HOLD_FIELDS  # one group a batch, not one a member
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == [missing]
    assert await counts(redis, keys, first) == {
        "state": "running",
        "total": 3,
        "pending": 1,
        "succeeded": 2,
        "failed": 0,
        "dead": 0,
    }
    assert await batches.pending_members(redis, keys, first) == [a[1]]
    assert (await counts(redis, keys, second))["state"] == "done"
    assert await fired(redis, keys) == ["success", "complete"]


async def test_members_acked_by_their_bid_count_as_by_their_hold_and_once(
    redis: Redis, keys: Keys
) -> None:
    """The worker acks a member holding nothing else by its bid (``Ack.member``,
    no ``Hold``): in one call with a member acked by its hold (a second group
    of the same batch) and one recovery took back, each counts once, the taken
    one not; the same acks again (a duplicate run) count nothing."""
    first, second = await open_batch(redis, keys), await open_batch(redis, keys)
    a = await add(redis, keys, first, 4)
    b = await add(redis, keys, second, 2)
    for bid in (first, second):
        await batches.close_batch(redis, keys, bid)
    raws = {jid: make_job(jid=jid, batch=first) for jid in a}
    raws.update({jid: make_job(jid=jid, batch=second) for jid in b})
    acks = [commands.Ack(make_job(jid=new_jid()), "plain")]
    for jid in (*a, *b):
        if jid == a[2]:  # acked by its hold, as a unique member would be
            held = MemberJob(redis, keys, jid, raws[jid]).held
            acks.append(commands.Ack(raws[jid], jid, holds=held))
        else:
            bid = holds.batch_member(orjson.loads(raws[jid]))
            assert bid is not None
            acks.append(commands.Ack(raws[jid], jid, member=bid))
    missing = acks[2]  # a[1]: not on the list
    for ack_ in acks:
        if ack_ is not missing:
            await redis.rpush(keys.in_progress(ME), ack_.raw)
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == [missing]
    expected = {"state": "running", "total": 4, "pending": 1, "succeeded": 3}
    assert await counts(redis, keys, first) == {**expected, "failed": 0, "dead": 0}
    assert await batches.pending_members(redis, keys, first) == [a[1]]
    assert (await counts(redis, keys, second))["state"] == "done"
    assert await fired(redis, keys) == ["success", "complete"]
    for ack_ in acks:  # each run again, acked again
        await redis.rpush(keys.in_progress(ME), ack_.raw)
    assert await commands.ack(redis, keys, identity=ME, acks=acks) == []
    assert await counts(redis, keys, first) == {
        **expected,
        "state": "done",  # a[1], now on the list, ended it; no other counted twice
        "pending": 0,
        "succeeded": 4,
        "failed": 0,
        "dead": 0,
    }
    assert (await counts(redis, keys, second))["succeeded"] == 2
    assert await fired(redis, keys) == ["success", "complete"]  # the first batch's


async def test_a_duplicate_ack_of_the_same_payload_counts_once(redis: Redis, keys: Keys) -> None:
    """At least once: a member recovered from a killed process runs twice, and both
    runs ack the same payload. The second ack counts nothing and fires nothing."""
    bid = await open_batch(redis, keys)
    first, second = await add(redis, keys, bid, 2)
    await batches.close_batch(redis, keys, bid)
    raw = make_job(jid=first, batch=bid)
    for _ in range(2):  # fetched, acked; its duplicate fetched again, acked again
        await redis.rpush(keys.in_progress(ME), raw)
        job = MemberJob(redis, keys, first, raw)
        await ack(job)
    assert await counts(redis, keys, bid) == {
        "state": "running",
        "total": 2,
        "pending": 1,
        "succeeded": 1,
        "failed": 0,
        "dead": 0,
    }
    # Every settling event, again: the member has ended, nothing moves.
    for event in Event:
        await settle(redis, keys, bid, first, event)
    assert (await counts(redis, keys, bid))["succeeded"] == 1
    assert await fired(redis, keys) == []
    await settle(redis, keys, bid, second, Event.DEAD)
    await settle(redis, keys, bid, second, Event.ACK)  # a duplicate that then succeeded
    await settle(redis, keys, bid, second, Event.OPERATOR_DELETE)  # then deleted from dead
    assert await counts(redis, keys, bid) == {
        "state": "done",
        "total": 2,
        "pending": 0,
        "succeeded": 1,
        "failed": 0,
        "dead": 1,
    }
    assert await fired(redis, keys) == ["death", "complete"]
    for event in Event:  # a done batch: never a second callback, never a negative count
        await settle(redis, keys, bid, first, event)
        await settle(redis, keys, bid, second, event)
    assert await fired(redis, keys) == []
    assert await counts(redis, keys, bid) == {
        "state": "done",
        "total": 2,
        "pending": 0,
        "succeeded": 1,
        "failed": 0,
        "dead": 1,
    }


async def test_no_callback_fires_while_the_batch_is_open(redis: Redis, keys: Keys) -> None:
    bid = await open_batch(redis, keys)
    [jid] = await add(redis, keys, bid, 1)
    await settle(redis, keys, bid, jid, Event.ACK)
    assert (await counts(redis, keys, bid))["state"] == "open"
    assert await fired(redis, keys) == []
    # The close finds every member ended: the callbacks go in the close's step.
    assert await batches.close_batch(redis, keys, bid) == "done"
    assert await fired(redis, keys) == ["success", "complete"]
    assert await batches.close_batch(redis, keys, bid) == "done"  # a second close: nothing
    assert await fired(redis, keys) == []


async def test_an_empty_batch_completes_at_its_close(redis: Redis, keys: Keys) -> None:
    bid = await open_batch(redis, keys)
    assert await batches.close_batch(redis, keys, bid) == "done"
    assert await fired(redis, keys) == ["success", "complete"]
    assert await redis.ttl(keys.batch(bid)) > 0  # kept a while, then gone


async def test_death_fires_at_the_first_dead_member_only(redis: Redis, keys: Keys) -> None:
    bid = await open_batch(redis, keys)
    jids = await add(redis, keys, bid, 3)
    await batches.close_batch(redis, keys, bid)
    await settle(redis, keys, bid, jids[0], Event.DEAD)
    assert await fired(redis, keys) == ["death"]
    await settle(redis, keys, bid, jids[1], Event.OPERATOR_KILL)
    assert await fired(redis, keys) == []
    await settle(redis, keys, bid, jids[2], Event.DISCARD)
    assert await fired(redis, keys) == ["complete"]
    status = await counts(redis, keys, bid)
    assert (status["dead"], status["failed"], status["succeeded"]) == (2, 1, 0)


async def test_a_retry_or_requeue_keeps_the_member_pending(redis: Redis, keys: Keys) -> None:
    bid = await open_batch(redis, keys)
    [jid] = await add(redis, keys, bid, 1)
    await batches.close_batch(redis, keys, bid)
    for event in (Event.RETRY, Event.RECOVERY_REQUEUE, Event.SHUTDOWN_REQUEUE):
        await settle(redis, keys, bid, jid, event)
    assert (await counts(redis, keys, bid))["pending"] == 1
    await settle(redis, keys, bid, jid, Event.ACK)
    assert await fired(redis, keys) == ["success", "complete"]


async def test_a_child_batch_is_one_member_of_its_parent(redis: Redis, keys: Keys) -> None:
    parent = await open_batch(redis, keys, events=("complete",))
    child = await open_batch(redis, keys, parent=parent, events=("success", "complete"))
    [outside] = await add(redis, keys, parent, 1)
    inner = await add(redis, keys, child, 2)
    await batches.close_batch(redis, keys, parent)
    await settle(redis, keys, parent, outside, Event.ACK)
    assert (await counts(redis, keys, parent))["pending"] == 1  # the child, still open
    await settle(redis, keys, child, inner[0], Event.ACK)
    await settle(redis, keys, child, inner[1], Event.ACK)
    assert await fired(redis, keys) == []  # the child is open yet
    assert await batches.close_batch(redis, keys, child) == "done"
    # The child's callbacks, then the parent's, in the close's one step.
    assert await fired(redis, keys) == ["success", "complete", "complete"]
    assert await counts(redis, keys, parent) == {
        "state": "done",
        "total": 2,
        "pending": 0,
        "succeeded": 2,
        "failed": 0,
        "dead": 0,
    }


async def test_a_child_with_a_dead_member_counts_dead_in_its_parent(
    redis: Redis, keys: Keys
) -> None:
    parent = await open_batch(redis, keys, events=("death",))
    child = await open_batch(redis, keys, parent=parent, events=())
    [jid] = await add(redis, keys, child, 1)
    await batches.close_batch(redis, keys, child)
    await batches.close_batch(redis, keys, parent)
    await settle(redis, keys, child, jid, Event.DEAD)
    assert await fired(redis, keys) == ["death"]
    assert (await counts(redis, keys, parent))["dead"] == 1


async def test_a_finished_batch_takes_no_member_nor_child(redis: Redis, keys: Keys) -> None:
    bid = await open_batch(redis, keys)
    await batches.close_batch(redis, keys, bid)
    with pytest.raises(BatchGone, match="gone or over"):
        await add(redis, keys, bid, 1)
    assert await redis.llen(keys.queue("default")) == 0  # nothing pushed
    opened = await batches.open_batch(
        redis, keys, bid=new_jid(), created_at=time.time(), parent=bid
    )
    assert opened is Opened.PARENT_OVER
    with pytest.raises(BatchGone):
        await add(redis, keys, new_jid(), 1)  # no such batch


async def test_a_bid_opened_twice_is_refused(redis: Redis, keys: Keys) -> None:
    bid = await open_batch(redis, keys)
    again = await batches.open_batch(redis, keys, bid=bid, created_at=time.time())
    assert again is Opened.EXISTS


async def test_a_scheduled_member_is_pending_and_in_the_schedule(redis: Redis, keys: Keys) -> None:
    bid = await open_batch(redis, keys)
    jid = new_jid()
    due = time.time() + 60
    members = [(jid, make_job(jid=jid, batch=bid))]
    await batches.add_members(redis, keys, bid=bid, queue="default", members=members, due=due)
    assert await redis.zscore(keys.schedule, members[0][1]) == pytest.approx(due)
    assert await redis.sismember(keys.batch_pending(bid), jid)


async def test_a_payload_naming_a_foreign_key_counts_nothing(redis: Redis, keys: Keys) -> None:
    """A payload is data: a batch field naming no batch of ours (or another key of
    the namespace) is refused by the prefix rule, or finds no batch hash."""
    await redis.set(keys.queue("x"), "not a batch")
    for key in (keys.queue("x"), keys.batch("nope"), keys.batch_prefix):
        groups = ["1", keys.batch_prefix, key, new_jid(), "@succeeded"]
        await redis.eval(BLOCK, 0, 1, *groups)  # type: ignore[misc]
    assert await redis.get(keys.queue("x")) == b"not a batch"
    assert not await redis.exists(keys.batch("nope"))


async def test_end_members_counts_a_basic_fetch_success_once(redis: Redis, keys: Keys) -> None:
    bid = await open_batch(redis, keys)
    [jid] = await add(redis, keys, bid, 1)
    await batches.close_batch(redis, keys, bid)
    held = [Hold("batch", keys.batch(bid), jid)]
    for _ in range(2):  # a duplicate run's second count: nothing
        await batches.end_members(redis, keys, held, Event.ACK)
    assert await counts(redis, keys, bid) == {
        "state": "done",
        "total": 1,
        "pending": 0,
        "succeeded": 1,
        "failed": 0,
        "dead": 0,
    }
    assert await fired(redis, keys) == ["success", "complete"]


async def test_an_add_under_a_once_token_happens_once(redis: Redis, keys: Keys) -> None:
    """A flow's stage started again (its step job ran twice, the first died between
    the add and the close): its members are not added again, not even one ended."""
    bid = await open_batch(redis, keys)
    jid = new_jid()
    members = [(jid, make_job(jid=jid, batch=bid))]
    for _ in range(2):
        total = await batches.add_members(
            redis, keys, bid=bid, queue="default", members=members, once="queue:default"
        )
        assert total == 1
        await settle(redis, keys, bid, jid, Event.ACK)  # it ran and ended in between
    assert await redis.llen(keys.queue("default")) == 1
    assert await batches.close_batch(redis, keys, bid) == "done"
    assert await fired(redis, keys) == ["success", "complete"]


async def test_mark_aborted_notes_a_batch_and_makes_none(redis: Redis, keys: Keys) -> None:
    bid = await open_batch(redis, keys)
    assert await batches.mark_aborted(redis, keys, bid)
    status = await batches.batch_status(redis, keys, bid)
    assert status is not None
    assert status["aborted"] is True
    gone = new_jid()
    assert not await batches.mark_aborted(redis, keys, gone)
    assert not await redis.exists(keys.batch(gone))  # no hash of one field made
