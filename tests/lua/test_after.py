"""after=[...] in Lua: after_enqueue.lua, after_abort.lua and includes/after_end.lua,
a prerequisite's end carried out by the step that settles it.

Every move of the lifecycle table is run on a prerequisite (the table's own
drivers): a move that ends it as a success releases the job waiting on it, one
that ends it otherwise ends that job (its edge's policy), one that does not
end it leaves the job waiting. Then the policies, several prerequisites, a
chain, duplicate settlements, prerequisites already ended, and the abort.
"""

from __future__ import annotations

import time

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import lifecycle
from cogworker_async.keys import Keys
from cogworker_async.lifecycle import Place, State, Transition
from cogworker_async.payload import new_jid
from cogworker_async.store import after, commands
from tests.lifecycle_places import places
from tests.lua import test_lifecycle_table as table
from tests.lua.support import drain, enqueue, make_job

pytestmark = pytest.mark.anyio

DEPS = "deps"  # the waiting jobs' queue (the prerequisites use "default")
ME = table.ME

# A move that ends the job without its step reading the payload's jid: bury.lua
# files an entry it could not parse (no jid to read), as for batches.
NOT_SEEN = {("bury", State.SCHEDULED, State.DEAD), ("bury", State.RETRYING, State.DEAD)}


async def waits(
    redis: Redis, keys: Keys, edges: dict[str, str], *, jid: str | None = None, **extra: object
) -> tuple[str, after.AfterReply]:
    """A job on DEPS waiting on ``edges`` (jid -> policy); its jid and the reply."""
    jid = jid or new_jid()
    body = {**orjson.loads(make_job(DEPS, jid=jid, **extra)), "after": edges}
    return jid, await after.enqueue_after(redis, keys, body, status_ttl=600)


async def released(redis: Redis, keys: Keys) -> list[str]:
    return [orjson.loads(raw)["jid"] for raw in await drain(redis, keys.queue(DEPS))]


async def state(redis: Redis, keys: Keys, jid: str) -> tuple[str | None, str | None]:
    fields = await redis.hmget(keys.status(jid), "state", "error_class")  # type: ignore[misc]
    return tuple(None if v is None else v.decode() for v in fields)  # type: ignore[return-value]


def _name(t: Transition) -> str:
    source = "new" if t.source is None else t.source.label
    return f"{t.script}:{source}->{t.target.label}"


# Moves of a prerequisite placed where a job waits or runs (not the arrivals,
# not a waiting job's own moves, not out of dead: judged dead as it is named).
PREREQUISITE_MOVES = [
    t
    for t in lifecycle.TRANSITIONS
    if t.source not in (None, State.WAITING, State.DEAD)
    and (t.script, t.source, t.target) not in table.PLACED_BY_MOVE
]


@pytest.mark.parametrize("transition", PREREQUISITE_MOVES, ids=_name)
async def test_each_move_of_a_prerequisite_releases_ends_or_leaves_its_dependent(
    redis: Redis, keys: Keys, transition: Transition
) -> None:
    pre = new_jid()
    limited = State.HELD in (transition.source, transition.target)
    fair = State.IN_LINE in (transition.source, transition.target)
    fields = {**(table.LIMITED if limited else {}), **(table.FAIR if fair else {})}
    job = table.Job(redis, keys, pre, make_job(jid=pre, **fields))
    # ME's list is registered, as a worker's first beat does: where the
    # enqueue (and an abort) look for running jobs.
    await redis.sadd(keys.in_progress_identities, ME)
    await table.put(job, transition.source)
    if transition.source in (State.HELD, State.IN_LINE):
        # A held job, or one on a fair key's line, is in no place the enqueue
        # walks: tracked, it is known.
        await redis.hset(keys.status(pre), mapping={"state": "queued"})
    dep, reply = await waits(redis, keys, {pre: "fail"})
    assert reply == after.AfterReply("waiting", waiting_on=1)
    assert await state(redis, keys, dep) == ("waiting", None)
    await table.MOVES[(transition.script, transition.source, transition.target)](job)
    assert await places(redis, keys, pre) == [transition.target.place]
    key = (transition.script, transition.source, transition.target)
    if transition.target is State.SUCCEEDED:
        assert await released(redis, keys) == [dep]
        assert await state(redis, keys, dep) == ("queued", None)
    elif (transition.target.ended or transition.target is State.DEAD) and key not in NOT_SEEN:
        assert await places(redis, keys, dep) == [Place.GONE]
        assert await state(redis, keys, dep) == ("failed", "DependencyFailed")
    else:
        assert await places(redis, keys, dep) == [Place.AFTER]
    if await places(redis, keys, dep) != [Place.AFTER]:
        # Nothing waits any more: the flag is down, settling steps look for nothing.
        assert not await redis.exists(keys.after_waiting, keys.after_left)
        assert not await redis.exists(keys.after_edges(pre))


async def run_and_ack(redis: Redis, keys: Keys, jid: str, queue: str = "default") -> bytes:
    got = await commands.fetch(
        redis, keys, identity=ME, queues=[queue], want=1, acks=[], reliable=True
    )
    [raw] = got.jobs
    assert orjson.loads(raw)["jid"] == jid
    assert await commands.ack(redis, keys, identity=ME, acks=[commands.Ack(raw, jid)]) == []
    return raw


async def run_and_fail(redis: Redis, keys: Keys, jid: str, *, dead: bool) -> None:
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["default"], want=1, acks=[], reliable=True
    )
    [raw] = got.jobs
    job = table.Job(redis, keys, jid, raw)
    await job.file(keys.dead if dead else None)


async def queued(redis: Redis, keys: Keys, jid: str | None = None) -> str:
    jid = jid or new_jid()
    await enqueue(redis, keys, "default", make_job(jid=jid))
    return jid


@pytest.mark.parametrize("dead", [True, False], ids=["dead", "discarded"])
async def test_each_policy_on_a_failed_prerequisite(redis: Redis, keys: Keys, dead: bool) -> None:
    pre = await queued(redis, keys)
    fail, _ = await waits(redis, keys, {pre: "fail"}, keep_result=60)
    drop, _ = await waits(redis, keys, {pre: "drop"})
    run, _ = await waits(redis, keys, {pre: "run"})
    await run_and_fail(redis, keys, pre, dead=dead)
    assert await released(redis, keys) == [run]
    assert await state(redis, keys, fail) == ("failed", "DependencyFailed")
    assert await state(redis, keys, drop) == ("aborted", "DependencyDropped")
    envelope = orjson.loads(await redis.lindex(keys.result(fail), 0))  # type: ignore[misc]
    assert envelope["ok"] is False
    assert envelope["error_class"] == "DependencyFailed"
    assert pre in envelope["error_message"]


async def test_a_job_runs_once_every_prerequisite_succeeded(redis: Redis, keys: Keys) -> None:
    first, second = await queued(redis, keys), await queued(redis, keys)
    dep, reply = await waits(redis, keys, {first: "fail", second: "fail"})
    assert reply.waiting_on == 2
    await run_and_ack(redis, keys, first)
    assert await released(redis, keys) == []
    waiting = await after.waiting_job(redis, keys, dep)
    assert waiting is not None
    assert waiting.waiting_on == (second,)
    await run_and_ack(redis, keys, second)
    assert await released(redis, keys) == [dep]
    assert await after.waiting_job(redis, keys, dep) is None


async def test_one_failed_prerequisite_ends_it_and_the_others_end_count_nothing(
    redis: Redis, keys: Keys
) -> None:
    first, second = await queued(redis, keys), await queued(redis, keys)
    dep, _ = await waits(redis, keys, {first: "fail", second: "fail"})
    await run_and_fail(redis, keys, first, dead=True)
    assert await state(redis, keys, dep) == ("failed", "DependencyFailed")
    await run_and_ack(redis, keys, second)
    assert await released(redis, keys) == []
    assert not await redis.exists(keys.after_waiting, keys.after_left)


async def test_a_chain_releases_step_by_step_and_fails_all_at_once(
    redis: Redis, keys: Keys
) -> None:
    pre = await queued(redis, keys)
    middle, _ = await waits(redis, keys, {pre: "fail"})
    last, reply = await waits(redis, keys, {middle: "fail"})
    assert reply.outcome == "waiting"  # middle waits itself: on its way
    await run_and_ack(redis, keys, pre)
    assert await released(redis, keys) == [middle]
    await enqueue(redis, keys, "default", make_job(jid=middle))  # middle runs
    await run_and_ack(redis, keys, middle)
    assert await released(redis, keys) == [last]
    # Failing: the whole chain ends in the prerequisite's step.
    pre = await queued(redis, keys)
    middle, _ = await waits(redis, keys, {pre: "fail"})
    last, _ = await waits(redis, keys, {middle: "fail"})
    await run_and_fail(redis, keys, pre, dead=True)
    assert await state(redis, keys, middle) == ("failed", "DependencyFailed")
    assert await state(redis, keys, last) == ("failed", "DependencyFailed")
    assert not await redis.exists(keys.after_waiting)


async def test_a_prerequisite_acked_twice_releases_once(redis: Redis, keys: Keys) -> None:
    pre = await queued(redis, keys)
    dep, _ = await waits(redis, keys, {pre: "fail"})
    other, _ = await waits(redis, keys, {await queued(redis, keys, new_jid()): "fail"})
    raw = await run_and_ack(redis, keys, pre)
    assert await released(redis, keys) == [dep]
    # The same run acked again (a resent ack; it is gone: missing), and run
    # again by a duplicate delivery: nothing more is released.
    missing = await commands.ack(redis, keys, identity=ME, acks=[commands.Ack(raw, pre)])
    assert [ack.jid for ack in missing] == [pre]
    await enqueue(redis, keys, "default", raw)
    got = await commands.fetch(
        redis, keys, identity=ME, queues=["default"], want=5, acks=[], reliable=True
    )
    for job in got.jobs:
        jid = orjson.loads(job)["jid"]
        await commands.ack(redis, keys, identity=ME, acks=[commands.Ack(job, jid)])
    assert sorted(await released(redis, keys)) == [other]


@pytest.mark.parametrize(
    ("told", "outcome"),
    [
        ({"status": "complete"}, "queued"),
        ({"status": "failed"}, "failed"),
        ({"status": "aborted"}, "failed"),
        ({"status": "working"}, "waiting"),
        ({"result": True}, "queued"),
        ({"result": False}, "failed"),
        ({"dead": True}, "failed"),
        ({"retry": True}, "waiting"),
        ({"schedule": True}, "waiting"),
    ],
)
async def test_a_prerequisite_is_judged_from_what_redis_knows(
    redis: Redis, keys: Keys, told: dict[str, object], outcome: str
) -> None:
    pre = new_jid()
    if "status" in told:
        await redis.hset(keys.status(pre), mapping={"state": str(told["status"])})
    if "result" in told:
        await redis.rpush(keys.result(pre), orjson.dumps({"ok": told["result"], "value": None}))
    for place in ("dead", "retry", "schedule"):
        if place in told:
            await redis.zadd(getattr(keys, place), {make_job(jid=pre): time.time()})
    dep, reply = await waits(redis, keys, {pre: "fail"})
    assert reply.outcome == outcome
    if outcome == "queued":
        assert await released(redis, keys) == [dep]
    elif outcome == "failed":
        assert reply.prerequisite == pre
        assert await state(redis, keys, dep) == ("failed", "DependencyFailed")
        assert await places(redis, keys, dep) == [Place.GONE]
    else:
        assert await places(redis, keys, dep) == [Place.AFTER]


async def test_a_prerequisite_nothing_tells_of_is_refused_nothing_written(
    redis: Redis, keys: Keys
) -> None:
    known = await queued(redis, keys)
    unknown = new_jid()
    with pytest.raises(after.PrerequisiteUnknown, match=unknown):
        await waits(redis, keys, {known: "fail", unknown: "run"})
    assert not await redis.exists(keys.after_waiting, keys.after_edges(known))
    assert await redis.keys(f"{keys.ns}:status:*") == []


async def test_run_policies_count_an_ended_prerequisite_at_once(redis: Redis, keys: Keys) -> None:
    failed = new_jid()
    await redis.hset(keys.status(failed), mapping={"state": "failed"})
    dep, reply = await waits(redis, keys, {failed: "run"})
    assert reply.outcome == "queued"
    assert await released(redis, keys) == [dep]
    dep, reply = await waits(redis, keys, {failed: "drop"})
    assert reply == after.AfterReply("dropped", prerequisite=failed)
    assert await state(redis, keys, dep) == ("aborted", "DependencyDropped")


async def test_aborting_a_waiting_job_fails_its_own_dependents(redis: Redis, keys: Keys) -> None:
    pre = await queued(redis, keys)
    middle, _ = await waits(redis, keys, {pre: "fail"})
    last, _ = await waits(redis, keys, {middle: "run"})
    assert await after.abort_waiting(redis, keys, middle, keep=60) is not None
    assert await after.abort_waiting(redis, keys, middle, keep=60) is None
    assert await redis.zscore(keys.aborted, middle) is not None
    # last's edge says run: it runs though middle never will.
    assert await released(redis, keys) == [last]
    await run_and_ack(redis, keys, pre)
    assert await released(redis, keys) == []


def test_the_scripts_write_the_error_classes_by_their_names() -> None:
    from cogworker_async.store.scripts import scripts_dir

    text = (scripts_dir() / "includes" / "after_end.lua").read_text()
    text += (scripts_dir() / "after_enqueue.lua").read_text()
    for name in after.ERROR_CLASSES:
        assert f'"{name}"' in text
