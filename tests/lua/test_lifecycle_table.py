"""Every transition of the lifecycle table, run: a job placed in its source, moved by
its script (through the ``store/`` wrapper the library calls), found in its target.

One driver per (script, source, target); a transition without a driver, or a
driver without a transition, fails the suite, so the table and the scripts
can't drift apart. ``locate`` (tests/lifecycle_places.py) reads every place.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
import pytest
from redis.asyncio import Redis

from cogworker_async import holds, lifecycle
from cogworker_async.keys import Keys
from cogworker_async.lifecycle import Place, State, Transition
from cogworker_async.payload import new_jid
from cogworker_async.store import aborts, admin, after, batches, commands, locks, orphans
from cogworker_async.store import limits as limits_store
from cogworker_async.store.periodic import SlotClaim, claim_slots
from cogworker_async.store.scripts import script
from tests.lifecycle_places import places
from tests.lua.support import JUDGE_TTL, enqueue, make_job, redis_now, trust_judge

pytestmark = pytest.mark.anyio

ME = "host:1:me"
MAX_ORPHANINGS = 3


@dataclass
class Job:
    redis: Redis
    keys: Keys
    jid: str
    raw: bytes

    def entry(self, **fields: object) -> bytes:
        """The job's payload with ``fields`` set (a failure's entry, a graduation's payload)."""
        return orjson.dumps({**orjson.loads(self.raw), **fields})

    def filing(self, target: str | None) -> commands.Filing:
        entry = self.entry(retry_count=0, error_class="E", error_message="boom")
        return commands.Filing(self.raw, self.jid, target, time.time() + 600, entry)

    async def file(self, target: str | None, **options: float) -> commands.FileOutcome:
        return await commands.file(
            self.redis,
            self.keys,
            identity=ME,
            filing=self.filing(target),
            dead_max_jobs=int(options.get("dead_max_jobs", 100)),
            dead_timeout=options.get("dead_timeout", 86_400.0),
        )


async def fetch_one(redis: Redis, keys: Keys, identity: str = ME) -> bytes:
    got = await commands.fetch(
        redis, keys, identity=identity, queues=["default"], want=1, acks=[], reliable=True
    )
    assert len(got.jobs) == 1
    return got.jobs[0]


async def put(job: Job, state: State | None) -> None:
    """Place ``job`` in ``state`` (None: nowhere yet, a job about to arrive)."""
    redis, keys = job.redis, job.keys
    if state is None:
        return
    if state is State.QUEUED:
        await enqueue(redis, keys, "default", job.raw)
    elif state is State.SCHEDULED:
        await redis.zadd(keys.schedule, {job.raw: time.time() + 3600})
    elif state is State.RETRYING:
        await redis.zadd(keys.retry, {job.raw: time.time() + 3600})
    elif state is State.DEAD:
        await redis.zadd(keys.dead, {job.raw: time.time()})
    elif state is State.RUNNING:
        await enqueue(redis, keys, "default", job.raw)
        assert await fetch_one(redis, keys) == job.raw
    elif state is State.HELD:
        await redis.lpush(keys.limit_parked(LIMIT), job.raw)
    elif state is State.IN_LINE:
        # As fair.lua's fair_line leaves it: on its key's line, the key on the ring.
        await limits_store.mark_limits_used(redis, keys, fair=True)
        await redis.hset(keys.fair_base("default"), FAIR_KEY, 1)
        await redis.lpush(keys.fair_ring("default"), FAIR_KEY)
        await redis.lpush(keys.fair_jobs("default", FAIR_KEY), job.raw)
    elif state is State.PARKED:
        await redis.rpush(keys.repeat_orphans, job.raw)
    elif state is State.WAITING:
        # Waiting on a prerequisite of its own, queued on PRE_QUEUE.
        await enqueue_after(job, await prerequisite(job))
    elif state is State.UNSETTLED:
        await put(job, State.RUNNING)
        assert await commands.park_unsettled(
            redis, keys, identity=ME, filing=job.filing(keys.retry)
        )
    else:
        raise AssertionError(f"no job can be placed in {state}: it has ended")


async def recover_dead_me(job: Job) -> orphans.RequeueResult:
    """ME has died (no presence, its last beat long ago): a trusted judge recovers its list."""
    redis, keys = job.redis, job.keys
    await redis.hset(keys.last_beat, ME, f"{await redis_now(redis) - 1000:.6f}")
    return await orphans.requeue(
        redis,
        keys,
        identity=ME,
        threshold=10.0,
        default_queue="default",
        max_orphanings=MAX_ORPHANINGS,
        live_window=60.0,
        judge=await trust_judge(redis, keys),
        judge_ttl=JUDGE_TTL,
    )


async def own_requeue(job: Job, finished: tuple[bytes, ...] = ()) -> None:
    await orphans.requeue(
        job.redis,
        job.keys,
        identity=ME,
        threshold=None,
        default_queue="default",
        max_orphanings=MAX_ORPHANINGS,
        live_window=60.0,
        finished=finished,
    )


async def orphaned_too_often(job: Job) -> orphans.RequeueResult:
    await job.redis.set(job.keys.orphanings(job.jid), MAX_ORPHANINGS)
    return await recover_dead_me(job)


async def graduate(job: Job, source: str) -> None:
    item = commands.Graduation(job.raw, job.entry(enqueued_at=time.time()), "default")
    result = await commands.graduate(job.redis, job.keys, source=source, items=[item], defer=60)
    assert result.moved == 1


async def enqueue_unique(job: Job, due: float | None) -> None:
    lock = job.keys.unique(f"t.job:{job.jid}")
    unique = locks.UniqueJob(lock, job.jid, 60, job.raw, due)
    [done] = await locks.enqueue_unique(job.redis, job.keys, queue="default", jobs=[unique])
    assert done.enqueued


async def claim_periodic(job: Job) -> None:
    claim = SlotClaim("tick", "60", "default", job.jid, job.raw, claim_ms=60_000)
    [outcome] = await claim_slots(job.redis, job.keys, [claim])
    assert outcome.kind == "pushed"


async def batch_add(job: Job, due: float | None) -> None:
    bid = new_jid()
    opened = await batches.open_batch(job.redis, job.keys, bid=bid, created_at=time.time())
    assert opened is batches.Opened.OPENED
    member = [(job.jid, job.raw)]
    await batches.add_members(
        job.redis, job.keys, bid=bid, queue="default", members=member, due=due
    )


async def file_unsettled(job: Job, target: str) -> None:
    [record] = await job.redis.lrange(job.keys.unsettled, 0, -1)
    assert isinstance(record, bytes)
    assert await commands.file_unsettled(
        job.redis,
        job.keys,
        record=record,
        target=target,
        jid=job.jid,
        score=time.time() + 600,
        entry=job.entry(error_class="E"),
    )


async def kill(job: Job, source: str) -> None:
    assert await admin.kill_entry(
        job.redis,
        job.keys,
        source=source,
        entry=job.raw,
        dead_entry=job.entry(error_class="Killed"),
        now=time.time(),
        dead_max_jobs=100,
        dead_timeout=86_400.0,
    )


async def enqueue_entry(job: Job, source: str) -> None:
    assert await admin.enqueue_entry(
        job.redis,
        job.keys,
        source=source,
        entry=job.raw,
        payload=job.entry(enqueued_at=time.time()),
        queue="default",
    )


async def drop(job: Job, key: str) -> None:
    dropped = await locks.drop_jobs(
        job.redis, key, entries=[job.raw], kinds=holds.kinds_table(job.keys)
    )
    assert dropped == 1


async def trim_dead(job: Job) -> None:
    """Another job filed into dead trims this one: older than dead_timeout."""
    await job.redis.zadd(job.keys.dead, {job.raw: 1.0})
    other = Job(job.redis, job.keys, new_jid(), b"")
    other.raw = make_job(jid=other.jid)
    await put(other, State.RUNNING)
    assert await other.file(job.keys.dead, dead_timeout=3600.0)


async def bury(job: Job, source: str) -> None:
    dead_entry = job.entry(error_class="UnparseableJob")
    assert await commands.bury(
        job.redis, job.keys, source=source, entry=job.raw, dead_entry=dead_entry
    )


async def remove_waiting(job: Job) -> None:
    removed = await aborts.remove_waiting(job.redis, job.keys, job.jid)
    assert removed is not None


async def remove_unsettled(job: Job) -> None:
    assert await aborts.remove_unsettled(job.redis, job.keys, job.jid) is not None


async def aborted_unsettled_filing(job: Job) -> None:
    """An abort answered while it ran (its tombstone), then handed over: filed as aborted."""
    await job.redis.zadd(job.keys.aborted, {job.jid: time.time()})
    [record] = await job.redis.lrange(job.keys.unsettled, 0, -1)
    assert isinstance(record, bytes)
    outcome = await commands.file_unsettled(
        job.redis,
        job.keys,
        record=record,
        target=job.keys.retry,
        jid=job.jid,
        score=time.time() + 600,
        entry=job.entry(error_class="E"),
    )
    assert outcome is commands.FileOutcome.ABORTED


async def aborted_filing(job: Job) -> None:
    await job.redis.zadd(job.keys.aborted, {job.jid: time.time()})
    assert await job.file(job.keys.retry) == commands.FileOutcome.ABORTED


async def raw_burial(job: Job) -> None:
    await job.redis.set(job.keys.repeat_orphans, "not a list")  # parking refused
    result = await orphaned_too_often(job)
    assert result.raw_burials == [job.raw]
    await job.redis.delete(job.keys.repeat_orphans)


async def swap_dead(job: Job) -> None:
    new = job.entry(error_class="ProcessDied")
    assert await orphans.swap_dead_entry(job.redis, job.keys, old=job.raw, new=new, score=1.0)


async def bury_orphan(job: Job) -> None:
    assert await orphans.bury_orphan(
        job.redis, job.keys, raw=job.raw, jid=job.jid, dead_entry=job.entry(error_class="PD")
    )


async def schedule(job: Job) -> None:
    # The client's own call (client.py runs schedule.lua itself).
    keys = job.keys
    await script("schedule").run(
        job.redis, [keys.schedule, keys.schedule_wakeup], [time.time() + 60, job.raw]
    )


async def expect(move: Awaitable[object]) -> None:
    """Run ``move``; its reply must say it moved something (truthy)."""
    assert await move


async def ack(job: Job) -> None:
    acks = [commands.Ack(job.raw, job.jid)]
    assert await commands.ack(job.redis, job.keys, identity=ME, acks=acks) == []


# The one limit of the jobs of the transitions in and out of "held".
LIMIT = "one"
LIMITED = {"limits": [["concurrency", LIMIT, 1]], "limit_slots": [LIMIT]}


FAIR_KEY = "tenant"
FAIR = {"fair": [FAIR_KEY, 1]}


async def onto_its_line(job: Job) -> None:
    """A fetch meets the fair job behind another key's (taken first): both go
    onto their lines, and a plain job newer than both is taken instead; one
    more left on the queue keeps the line's job from being fed back."""
    redis, keys = job.redis, job.keys
    await limits_store.mark_limits_used(redis, keys, fair=True)
    await redis.rpush(keys.queue("default"), make_job(jid=new_jid(), fair=["other", 1]))
    await enqueue(redis, keys, "default", make_job(jid=new_jid()), make_job(jid=new_jid()))
    await fetch_one(redis, keys)


async def fed_back(job: Job) -> None:
    """A plain job is taken and the queue is left empty: the line's job is fed
    onto it for a blocking wait."""
    await enqueue(job.redis, job.keys, "default", make_job(jid=new_jid()))
    assert await fetch_one(job.redis, job.keys) != job.raw


async def turn_over_a_limit(job: Job) -> None:
    """Its key's turn comes while another job holds its limit's one slot."""
    await limits_store.mark_limits_used(job.redis, job.keys, fair=True)
    await job.redis.sadd(job.keys.limit_slots(LIMIT), new_jid())
    got = await commands.fetch(
        job.redis, job.keys, identity=ME, queues=["default"], want=1, acks=[], reliable=True
    )
    assert got.jobs == []


async def hold_back(job: Job, *, blocking: bool = False) -> None:
    """Another job of the key holds its one slot: ``job`` is taken (by a fetch,
    or by a blocking wait, as the running job was, then ``admit_taken``) and held."""
    slots = job.keys.limit_slots(LIMIT)
    await limits_store.mark_limits_used(job.redis, job.keys)
    await job.redis.delete(slots)  # a BLMOVE takes no slot: the one it holds is another's
    await job.redis.sadd(slots, new_jid())
    if blocking:
        admitted = await limits_store.admit_taken(
            job.redis, job.keys, identity=ME, job=job.raw, reliable=True
        )
        assert admitted is limits_store.Admission.PARKED
    else:
        got = await commands.fetch(
            job.redis, job.keys, identity=ME, queues=["default"], want=1, acks=[], reliable=True
        )
        assert got.jobs == []


async def slot_freed(job: Job) -> None:
    """The job holding the key's slot succeeds: its ack lets the held job back in."""
    other = make_job(jid=new_jid(), **LIMITED)
    await job.redis.sadd(job.keys.limit_slots(LIMIT), orjson.loads(other)["jid"])
    await job.redis.lpush(job.keys.in_progress(ME), other)
    held = holds.read(orjson.loads(other), job.keys)
    acks = [commands.Ack(other, orjson.loads(other)["jid"], holds=held)]
    assert await commands.ack(job.redis, job.keys, identity=ME, acks=acks) == []


async def window_reopened(job: Job) -> None:
    """The window the job was held on has room again: the limit timers' pass lets it in."""
    keys = job.keys
    await job.redis.zadd(keys.limit_due, {LIMIT: 0})
    await job.redis.hset(keys.limit_windows, LIMIT, "window 1 60000")
    assert await limits_store.limits_due(job.redis, keys) is None


async def give_back(job: Job) -> None:
    given = await commands.give_back(
        job.redis, job.keys, identity=ME, jobs=[job.raw], default_queue="default"
    )
    assert given.given == 1


PRE_QUEUE = "pre"  # where a waiting job's prerequisite waits (fetched apart)


async def prerequisite(job: Job, **fields: object) -> str:
    """A new job on PRE_QUEUE (``fields``: none, or what Redis tells of its end)."""
    pre = new_jid()
    if fields.get("status"):
        await job.redis.hset(job.keys.status(pre), mapping={"state": str(fields["status"])})
    elif fields.get("result"):
        await job.redis.rpush(job.keys.result(pre), orjson.dumps({"ok": True, "value": 1}))
    else:
        await enqueue(job.redis, job.keys, PRE_QUEUE, make_job(PRE_QUEUE, jid=pre))
    return pre


async def enqueue_after(job: Job, pre: str) -> after.AfterReply:
    body = {**orjson.loads(job.raw), "after": {pre: "fail"}}
    return await after.enqueue_after(job.redis, job.keys, body, status_ttl=None)


async def prerequisite_of(job: Job) -> bytes:
    """The waiting job's prerequisite, fetched (running) from PRE_QUEUE."""
    got = await commands.fetch(
        job.redis, job.keys, identity=ME, queues=[PRE_QUEUE], want=1, acks=[], reliable=True
    )
    assert len(got.jobs) == 1
    return got.jobs[0]


async def prerequisite_succeeds(job: Job) -> None:
    raw = await prerequisite_of(job)
    acks = [commands.Ack(raw, orjson.loads(raw)["jid"])]
    assert await commands.ack(job.redis, job.keys, identity=ME, acks=acks) == []


async def prerequisite_dies(job: Job) -> None:
    pre = Job(job.redis, job.keys, "", await prerequisite_of(job))
    pre.jid = orjson.loads(pre.raw)["jid"]
    await pre.file(job.keys.dead)


async def arrives_after(job: Job, **fields: object) -> None:
    reply = await enqueue_after(job, await prerequisite(job, **fields))
    expected = {"": "waiting", "complete": "queued", "failed": "failed"}
    assert reply.outcome == expected[str(fields.get("status", ""))]


Move = Callable[[Job], Awaitable[None]]
S = State
MOVES: dict[tuple[str, State | None, State], Move] = {
    ("enqueue", None, S.QUEUED): lambda j: expect(enqueue(j.redis, j.keys, "default", j.raw)),
    ("schedule", None, S.SCHEDULED): schedule,
    ("enqueue_unique", None, S.QUEUED): lambda j: enqueue_unique(j, None),
    ("enqueue_unique", None, S.SCHEDULED): lambda j: enqueue_unique(j, time.time() + 60),
    ("periodic_claim", None, S.QUEUED): claim_periodic,
    ("batch_add", None, S.QUEUED): lambda j: batch_add(j, None),
    ("batch_add", None, S.SCHEDULED): lambda j: batch_add(j, time.time() + 60),
    ("graduate", S.SCHEDULED, S.QUEUED): lambda j: graduate(j, j.keys.schedule),
    ("graduate", S.RETRYING, S.QUEUED): lambda j: graduate(j, j.keys.retry),
    ("fetch", S.QUEUED, S.RUNNING): lambda j: expect(fetch_one(j.redis, j.keys)),
    ("fetch", S.QUEUED, S.HELD): hold_back,
    ("admit_taken", S.RUNNING, S.HELD): lambda j: hold_back(j, blocking=True),
    ("ack", S.HELD, S.QUEUED): slot_freed,
    ("limits_due", S.HELD, S.QUEUED): window_reopened,
    ("back_off", S.RUNNING, S.HELD): lambda j: expect(
        limits_store.back_off(
            j.redis, j.keys, identity=ME, job=j.raw, key=LIMIT, seconds=30, reliable=True
        )
    ),
    ("ack", S.RUNNING, S.SUCCEEDED): ack,
    ("fetch", S.RUNNING, S.SUCCEEDED): lambda j: expect(
        commands.fetch(
            j.redis,
            j.keys,
            identity=ME,
            queues=["default"],
            want=1,
            acks=[commands.Ack(j.raw, j.jid)],
            reliable=True,
        )
    ),
    ("file", S.RUNNING, S.RETRYING): lambda j: expect(j.file(j.keys.retry)),
    ("file", S.RUNNING, S.DEAD): lambda j: expect(j.file(j.keys.dead)),
    ("file", S.RUNNING, S.FAILED): lambda j: expect(j.file(None)),
    ("file", S.RUNNING, S.ABORTED): aborted_filing,
    ("settle_aborted", S.RUNNING, S.ABORTED): lambda j: expect(
        aborts.settle_aborted(j.redis, j.keys, identity=ME, raw=j.raw, jid=j.jid)
    ),
    ("give_back", S.RUNNING, S.QUEUED): give_back,
    ("park_unsettled", S.RUNNING, S.UNSETTLED): lambda j: expect(
        commands.park_unsettled(j.redis, j.keys, identity=ME, filing=j.filing(j.keys.retry))
    ),
    ("file_unsettled", S.UNSETTLED, S.RETRYING): lambda j: file_unsettled(j, j.keys.retry),
    ("file_unsettled", S.UNSETTLED, S.DEAD): lambda j: file_unsettled(j, j.keys.dead),
    ("file_unsettled", S.UNSETTLED, S.ABORTED): aborted_unsettled_filing,
    ("requeue", S.RUNNING, S.QUEUED): lambda j: expect(recover_dead_me(j)),
    ("requeue", S.RUNNING, S.SUCCEEDED): lambda j: own_requeue(j, finished=(j.raw,)),
    ("requeue", S.RUNNING, S.PARKED): lambda j: expect(orphaned_too_often(j)),
    ("requeue", S.RUNNING, S.DEAD): raw_burial,
    ("bury_orphan", S.PARKED, S.DEAD): bury_orphan,
    ("swap_dead_entry", S.DEAD, S.DEAD): swap_dead,
    ("bury", S.SCHEDULED, S.DEAD): lambda j: bury(j, j.keys.schedule),
    ("bury", S.RETRYING, S.DEAD): lambda j: bury(j, j.keys.retry),
    ("abort_entry", S.QUEUED, S.ABORTED): remove_waiting,
    ("abort_entry", S.SCHEDULED, S.ABORTED): remove_waiting,
    ("abort_entry", S.RETRYING, S.ABORTED): remove_waiting,
    ("abort_unsettled", S.UNSETTLED, S.ABORTED): remove_unsettled,
    ("enqueue_entry", S.RETRYING, S.QUEUED): lambda j: enqueue_entry(j, j.keys.retry),
    ("enqueue_entry", S.SCHEDULED, S.QUEUED): lambda j: enqueue_entry(j, j.keys.schedule),
    ("enqueue_entry", S.DEAD, S.QUEUED): lambda j: enqueue_entry(j, j.keys.dead),
    ("kill_entry", S.RETRYING, S.DEAD): lambda j: kill(j, j.keys.retry),
    ("kill_entry", S.SCHEDULED, S.DEAD): lambda j: kill(j, j.keys.schedule),
    ("drop_jobs", S.SCHEDULED, S.DISCARDED): lambda j: drop(j, j.keys.schedule),
    ("drop_jobs", S.RETRYING, S.DISCARDED): lambda j: drop(j, j.keys.retry),
    ("drop_jobs", S.DEAD, S.DISCARDED): lambda j: drop(j, j.keys.dead),
    ("drop_jobs", S.QUEUED, S.DISCARDED): lambda j: expect(
        locks.drop_jobs(
            j.redis, j.keys.queue("default"), pop=1, kind="list", kinds=holds.kinds_table(j.keys)
        )
    ),
    ("fetch", S.QUEUED, S.IN_LINE): onto_its_line,
    ("fetch", S.IN_LINE, S.RUNNING): lambda j: expect(fetch_one(j.redis, j.keys)),
    ("fetch", S.IN_LINE, S.HELD): turn_over_a_limit,
    ("fetch", S.IN_LINE, S.QUEUED): fed_back,
    ("drop_jobs", S.IN_LINE, S.DISCARDED): lambda j: expect(
        locks.drop_jobs(
            j.redis,
            j.keys.fair_jobs("default", FAIR_KEY),
            pop=1,
            kind="list",
            kinds=holds.kinds_table(j.keys),
        )
    ),
    ("after_enqueue", None, S.WAITING): arrives_after,
    ("after_enqueue", None, S.QUEUED): lambda j: arrives_after(j, status="complete"),
    ("after_enqueue", None, S.FAILED): lambda j: arrives_after(j, status="failed"),
    ("ack", S.WAITING, S.QUEUED): prerequisite_succeeds,
    ("file", S.WAITING, S.FAILED): prerequisite_dies,
    ("after_abort", S.WAITING, S.ABORTED): lambda j: expect(
        after.abort_waiting(j.redis, j.keys, j.jid, keep=3600)
    ),
    # Placed by the move itself: the other job's dead filing trims it.
    ("file", S.DEAD, S.DISCARDED): trim_dead,
}
del S

# The sources a move places the job in itself (see its driver).
PLACED_BY_MOVE = {("file", State.DEAD, State.DISCARDED)}


def _key(t: Transition) -> tuple[str, State | None, State]:
    return (t.script, t.source, t.target)


def _name(t: Transition) -> str:
    source = "new" if t.source is None else t.source.label
    return f"{t.script}:{source}->{t.target.label}"


def test_every_transition_has_one_driver_and_every_driver_a_transition() -> None:
    table = [_key(t) for t in lifecycle.TRANSITIONS]
    assert len(table) == len(set(table)), "a (script, source, target) listed twice"
    assert set(table) == set(MOVES)


@pytest.mark.parametrize("transition", lifecycle.TRANSITIONS, ids=_name)
async def test_the_script_moves_the_job_from_source_to_target(
    redis: Redis, keys: Keys, transition: Transition
) -> None:
    jid = new_jid()
    limited = State.HELD in (transition.source, transition.target)
    fair = State.IN_LINE in (transition.source, transition.target)
    fields = {**(LIMITED if limited else {}), **(FAIR if fair else {})}
    job = Job(redis, keys, jid, make_job(jid=jid, **fields))
    if _key(transition) not in PLACED_BY_MOVE:
        await put(job, transition.source)
        before = [Place.GONE] if transition.source is None else [transition.source.place]
        assert await places(redis, keys, jid) == before
    await MOVES[_key(transition)](job)
    assert await places(redis, keys, jid) == [transition.target.place]
